import { OutboxStoreError } from "@effect-outbox/core/Errors"
import * as SqlStates from "@effect-outbox/core/SqlStates"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"

/** SQLSTATE of the underlying PostgreSQL error, when the driver kept it. */
export const sqlState = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/** SQLSTATEs that mean "the database, not the request": core's one list (`SqlStates`). */
export const isInfrastructureState = SqlStates.isInfrastructure

/** Retriable: the driver says so, the SQLSTATE is an infrastructure one, or the connection failed. */
export const isRetriable = (error: SqlError): boolean =>
  error.isRetryable || error.reason._tag === "ConnectionError" || isInfrastructureState(sqlState(error))

/**
 * A database failure as the port's typed error, naming the operation. Connection loss,
 * serialization failures, deadlocks, timeouts and the infrastructure states above are retriable.
 */
export const fromSqlError =
  (operation: string) =>
  (error: SqlError): OutboxStoreError => {
    const state = sqlState(error)
    // The driver's own message is generic ("Query failed"); PostgreSQL's is in the cause.
    const cause = error.reason.cause as { readonly message?: unknown } | undefined
    const detail =
      typeof cause?.message === "string" && cause.message !== error.message
        ? `${error.message}: ${cause.message}`
        : error.message
    return new OutboxStoreError({
      operation,
      reason: `${error.reason._tag}${state === undefined ? "" : ` (SQLSTATE ${state})`}: ${detail}`,
      retriable: isRetriable(error),
      cause: error
    })
  }

// A store call's stack trace would name this line; capturing it costs node CPU on every call.
const noStackTrace = { captureStackTrace: false } as const

/** Maps the SqlError channel of a database call and names its span. */
export const run =
  (operation: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>) =>
    effect.pipe(Effect.mapError(fromSqlError(operation)), Effect.withSpan(`pg.${operation}`, undefined, noStackTrace))

export const invalid = (operation: string, reason: string): OutboxStoreError =>
  new OutboxStoreError({ operation, reason, retriable: false })
