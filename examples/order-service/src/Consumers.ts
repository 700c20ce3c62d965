/**
 * The two consumers of `OrderCreated`, each its own consumer group:
 *
 * - billing creates exactly one invoice per order: the insert runs inside `processOnce`, in one
 *   transaction with the dedup record. It drives the outbox lifecycle.
 * - notifications e-mails the customer through the provider with the event id as idempotency key.
 *   An e-mail cannot join a transaction, so the provider deduplicates. It leaves the
 *   lifecycle to billing (one group per database drives it).
 *
 * Both dead-letter a record whose payload does not decode.
 *
 * @since 0.1.0
 */

import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import { EmailProvider } from "./EmailProvider.ts"
import type { OrdersTopic } from "./Orders.ts"

const retry = { maxAttempts: 5, retrySchedule: Schedule.exponential("50 millis") } as const

/**
 * @since 0.1.0
 * @category consumers
 */
export const billing = (options: { readonly schema: string; readonly topic: OrdersTopic; readonly groupId: string }) =>
  Topic.consumer(options.topic, {
    groupId: options.groupId,
    ...retry,
    handler: (message) =>
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
        sql.unsafe(`INSERT INTO "${options.schema}".invoices (order_id, amount_cents, event_id) VALUES ($1, $2, $3)`, [
          message.payload.orderId,
          message.payload.amountCents,
          message.idempotencyKey
        ])
      )
  })

/**
 * @since 0.1.0
 * @category consumers
 */
export const notifications = (options: { readonly topic: OrdersTopic; readonly groupId: string }) =>
  Topic.consumer(options.topic, {
    groupId: options.groupId,
    lifecycle: false,
    ...retry,
    handler: (message) =>
      EmailProvider.use((provider) =>
        provider.send({
          idempotencyKey: message.idempotencyKey,
          to: message.payload.customerEmail,
          subject: `Your order ${message.payload.orderId} is confirmed`
        })
      )
  })
