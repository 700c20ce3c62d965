/**
 * The demo's reference service: a shop places orders and announces `OrderPlaced` through the
 * outbox, in the same transaction as the order row; billing consumes the announcements and
 * creates one invoice per order, its insert committing with the inbox record (`processOnce`).
 *
 * The invoice table has NO unique constraint on `order_id` on purpose: exactly-once effects come
 * from the inbox, and the summary counts duplicates instead of letting the database hide them.
 *
 * @since 0.1.0
 */
import type * as Consumer from "@effect-outbox/core/Consumer"
import type { OutboxValidationError, StoreError } from "@effect-outbox/core/Errors"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

/**
 * @since 0.1.0
 * @category models
 */
export const OrderPlaced = Schema.Struct({
  orderId: Schema.String,
  customerId: Schema.String,
  amountCents: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
})

/**
 * @since 0.1.0
 * @category models
 */
export type OrderPlaced = typeof OrderPlaced.Type

/**
 * The topic, declared once for both sides: keyed by customer, so one customer's orders are
 * published and billed in the order they were placed.
 *
 * @since 0.1.0
 * @category topics
 */
export const ordersTopic = (name: string) => Topic.make({ name, schema: OrderPlaced, key: (order) => order.customerId })

/**
 * @since 0.1.0
 * @category models
 */
export type OrdersTopic = ReturnType<typeof ordersTopic>

/**
 * The demo's own tables, in `schema`.
 *
 * @since 0.1.0
 * @category schema
 */
export const createTables = (schema: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${schema}"`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".orders (
      seq bigint GENERATED ALWAYS AS IDENTITY,
      id text PRIMARY KEY,
      customer_id text NOT NULL,
      amount_cents integer NOT NULL
    )`).unprepared
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${schema}".invoices (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      order_id text NOT NULL,
      customer_id text NOT NULL,
      amount_cents integer NOT NULL,
      event_id text NOT NULL
    )`).unprepared
  })

/**
 * Places an order: the order row and its `OrderPlaced` event in ONE transaction. When
 * `failAfterEnqueue` is set the transaction fails after both writes (a payment check that says
 * no), so neither the order nor its event survives. Returns the event id either way.
 *
 * @since 0.1.0
 * @category producing
 */
export const placeOrder = (
  schema: string,
  topic: OrdersTopic,
  order: OrderPlaced,
  failAfterEnqueue: boolean
): Effect.Effect<
  { readonly eventId: EventId; readonly committed: boolean },
  OutboxValidationError | StoreError | SqlError,
  SqlClient.SqlClient | Outbox.Outbox
> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    let eventId: EventId | undefined
    const result = yield* Outbox.withTransaction(
      Effect.gen(function* () {
        yield* sql.unsafe(`INSERT INTO "${schema}".orders (id, customer_id, amount_cents) VALUES ($1, $2, $3)`, [
          order.orderId,
          order.customerId,
          order.amountCents
        ])
        eventId = yield* Topic.enqueue(topic, order)
        if (failAfterEnqueue) return yield* Effect.fail(new PaymentDeclined({ orderId: order.orderId }))
      })
    ).pipe(Effect.result)
    if (result._tag === "Success") return { eventId: eventId!, committed: true }
    if (result.failure._tag === "PaymentDeclined") return { eventId: eventId!, committed: false }
    return yield* Effect.fail(result.failure)
  })

/**
 * @since 0.1.0
 * @category errors
 */
export class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", {
  orderId: Schema.String
}) {}

/**
 * A transient failure of the billing handler (a flaky downstream); the consumer retries it.
 *
 * @since 0.1.0
 * @category errors
 */
export class LedgerUnavailable extends Schema.TaggedError<LedgerUnavailable>()("LedgerUnavailable", {
  orderId: Schema.String,
  retriable: Schema.Boolean
}) {
  override get message() {
    return `ledger unavailable while billing ${this.orderId}`
  }
}

/**
 * A record a broken producer wrote around the typed topic (`amountCents` as a string): it does
 * not decode, so the consumer dead-letters it at once.
 *
 * @since 0.1.0
 * @category producing
 */
export const enqueuePoison = (topicName: string, orderId: string, customerId: string) =>
  Outbox.enqueueAutocommit({
    topic: topicName,
    key: customerId,
    payload: new TextEncoder().encode(JSON.stringify({ orderId, customerId, amountCents: "twelve euros" }))
  })

/**
 * The billing consumer: one invoice per order. Runs inside `processOnce`'s transaction, so the
 * invoice and the inbox record commit together. `flaky(orderId)` makes the first attempt for
 * that order fail transiently, to show bounded retries.
 *
 * @since 0.1.0
 * @category consuming
 */
export const billing = (options: {
  readonly schema: string
  readonly topic: OrdersTopic
  readonly groupId: string
  readonly flaky: (orderId: string) => boolean
  readonly onRetry?: () => void
}) =>
  Topic.consumer(options.topic, {
    groupId: options.groupId,
    maxAttempts: 4,
    // Short delays: the demo wants to show a retry, not wait for one.
    retrySchedule: Schedule.exponential("25 millis"),
    handler: (message: Consumer.Message<OrderPlaced>) =>
      Effect.gen(function* () {
        const order = message.payload
        if (message.attempt === 1 && options.flaky(order.orderId)) {
          options.onRetry?.()
          return yield* Effect.fail(new LedgerUnavailable({ orderId: order.orderId, retriable: true }))
        }
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(
          `INSERT INTO "${options.schema}".invoices (order_id, customer_id, amount_cents, event_id) VALUES ($1, $2, $3, $4)`,
          [order.orderId, order.customerId, order.amountCents, message.idempotencyKey]
        )
      })
  })
