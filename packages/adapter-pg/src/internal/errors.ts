import { OutboxStoreError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"

/** SQLSTATE of the underlying PostgreSQL error, when the driver kept it. */
export const sqlState = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/**
 * A database failure as the port's typed error, naming the operation. Connection loss,
 * serialization failures, deadlocks and timeouts are retriable (the driver's classification).
 */
export const fromSqlError = (operation: string) => (error: SqlError): OutboxStoreError => {
  const state = sqlState(error)
  // The driver's own message is generic ("Query failed"); PostgreSQL's is in the cause.
  const cause = error.reason.cause as { readonly message?: unknown } | undefined
  const detail = typeof cause?.message === "string" && cause.message !== error.message
    ? `${error.message}: ${cause.message}`
    : error.message
  return new OutboxStoreError({
    operation,
    reason: `${error.reason._tag}${state === undefined ? "" : ` (SQLSTATE ${state})`}: ${detail}`,
    retriable: error.isRetryable,
    cause: error
  })
}

/** Maps the SqlError channel of a database call and names its span. */
export const run = (operation: string) => <A, R>(effect: Effect.Effect<A, SqlError, R>) =>
  effect.pipe(Effect.mapError(fromSqlError(operation)), Effect.withSpan(`pg.${operation}`))

export const invalid = (operation: string, reason: string): OutboxStoreError =>
  new OutboxStoreError({ operation, reason, retriable: false })

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
export const isUuid = (value: string): boolean => uuid.test(value)
