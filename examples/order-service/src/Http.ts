/**
 * The HTTP API (Effect's HTTP server):
 *
 * - `POST /orders` — body `{ orderId, customerEmail, amountCents }`: writes the order and
 *   enqueues `OrderCreated` in one transaction; `201 { orderId, eventId }`, `400` for a body
 *   that does not decode, `409` for an existing order id (nothing written, no event).
 * - `GET /orders/:id` — the order and how many invoices billing created for it.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Orders from "./Orders.ts"

/**
 * @since 0.1.0
 * @category routes
 */
export const routes = (options: { readonly schema: string; readonly topic: Orders.OrdersTopic }) =>
  HttpRouter.addAll([
    HttpRouter.route(
      "POST",
      "/orders",
      Effect.gen(function* () {
        const body = yield* HttpServerRequest.schemaBodyJson(Orders.PlaceOrder).pipe(Effect.result)
        if (body._tag === "Failure") {
          return yield* HttpServerResponse.json(
            { error: "invalid order", detail: body.failure.message },
            { status: 400 }
          )
        }
        const placed = yield* Orders.placeOrder(options.schema, options.topic, body.success).pipe(Effect.result)
        if (placed._tag === "Failure") {
          if (placed.failure._tag === "DuplicateOrder") {
            return yield* HttpServerResponse.json({ error: placed.failure.message }, { status: 409 })
          }
          return yield* Effect.fail(placed.failure)
        }
        return yield* HttpServerResponse.json(
          { orderId: body.success.orderId, eventId: placed.success },
          { status: 201 }
        )
      })
    ),
    HttpRouter.route(
      "GET",
      "/orders/:id",
      Effect.gen(function* () {
        const { id } = yield* HttpRouter.schemaPathParams(Schema.Struct({ id: Schema.String }))
        const order = yield* Orders.getOrder(options.schema, id)
        return yield* Option.match(order, {
          onNone: () => HttpServerResponse.json({ error: `no order ${id}` }, { status: 404 }),
          onSome: (found) => HttpServerResponse.json(found)
        })
      })
    )
  ])
