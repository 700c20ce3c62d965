/**
 * The order domain: an order row and its `OrderCreated` event, written in ONE transaction.
 * The topic is declared once and types both the producer (this module) and the
 * consumers (billing, notifications).
 *
 * @since 0.1.0
 */
import type { OutboxValidationError, StoreError } from "@effect-outbox/core/Errors"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

/**
 * What `POST /orders` accepts.
 *
 * @since 0.1.0
 * @category models
 */
export const PlaceOrder = Schema.Struct({
  orderId: Schema.NonEmptyString,
  customerEmail: Schema.String.check(Schema.isPattern(/^[^@\s]+@[^@\s]+$/)),
  amountCents: Schema.Int.check(Schema.isGreaterThan(0))
})

/**
 * @since 0.1.0
 * @category models
 */
export type PlaceOrder = typeof PlaceOrder.Type

/**
 * The event: what every consumer of the orders topic receives.
 *
 * @since 0.1.0
 * @category events
 */
export const OrderCreated = Schema.Struct({
  orderId: Schema.NonEmptyString,
  customerEmail: Schema.String.check(Schema.isPattern(/^[^@\s]+@[^@\s]+$/)),
  amountCents: Schema.Int.check(Schema.isGreaterThan(0))
})

/**
 * @since 0.1.0
 * @category events
 */
export type OrderCreated = typeof OrderCreated.Type

/**
 * The orders topic, keyed by order id.
 *
 * @since 0.1.0
 * @category topics
 */
export const ordersTopic = (name: string) => Topic.make({ name, schema: OrderCreated, key: (order) => order.orderId })

/**
 * @since 0.1.0
 * @category topics
 */
export type OrdersTopic = ReturnType<typeof ordersTopic>

/**
 * The service's own tables: orders, and billing's invoices (no unique constraint on `order_id`:
 * one invoice per order is the inbox's job, and tests count).
 *
 * @since 0.1.0
 * @category schema
 */
export const createTables = (schema: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".orders (
      id text PRIMARY KEY,
      customer_email text NOT NULL,
      amount_cents integer NOT NULL,
      event_id uuid NOT NULL
    )`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".invoices (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      order_id text NOT NULL,
      amount_cents integer NOT NULL,
      event_id uuid NOT NULL
    )`).unprepared
  })

/**
 * An order with this id exists already; nothing was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class DuplicateOrder extends Schema.TaggedError<DuplicateOrder>()("DuplicateOrder", {
  orderId: Schema.String
}) {
  override get message() {
    return `order ${this.orderId} exists already`
  }
}

/**
 * Writes the order and enqueues `OrderCreated` in one transaction: both commit or neither.
 *
 * @since 0.1.0
 * @category commands
 */
export const placeOrder = (
  schema: string,
  topic: OrdersTopic,
  order: PlaceOrder
): Effect.Effect<
  EventId,
  DuplicateOrder | OutboxValidationError | StoreError | SqlError,
  SqlClient.SqlClient | Outbox.Outbox
> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // The order row and its event in one transaction: the SqlClient writes join it.
    return yield* Outbox.withTransaction(
      Effect.gen(function* () {
        const eventId = yield* Topic.enqueue(topic, order)
        const inserted = yield* sql.unsafe<{ id: string }>(
          `INSERT INTO "${schema}".orders (id, customer_email, amount_cents, event_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO NOTHING RETURNING id`,
          [order.orderId, order.customerEmail, order.amountCents, eventId]
        )
        // Failing here rolls the enqueued event back with the transaction: no phantom event.
        if (inserted.length === 0) return yield* new DuplicateOrder({ orderId: order.orderId })
        return eventId
      })
    )
  })

/**
 * An order and whether billing invoiced it.
 *
 * @since 0.1.0
 * @category queries
 */
export const getOrder = (schema: string, orderId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{
      id: string
      customer_email: string
      amount_cents: number
      event_id: string
      invoices: number
    }>(
      `SELECT o.id, o.customer_email, o.amount_cents, o.event_id::text AS event_id,
              (SELECT count(*)::int FROM "${schema}".invoices i WHERE i.order_id = o.id) AS invoices
         FROM "${schema}".orders o WHERE o.id = $1`,
      [orderId]
    )
    return Option.fromNullishOr(rows[0]).pipe(
      Option.map((row) => ({
        orderId: row.id,
        customerEmail: row.customer_email,
        amountCents: row.amount_cents,
        eventId: row.event_id,
        invoices: row.invoices
      }))
    )
  })
