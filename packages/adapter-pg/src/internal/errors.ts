import { OutboxStoreError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"

/** SQLSTATE of the underlying PostgreSQL error, when the driver kept it. */
export const sqlState = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/**
 * SQLSTATEs that mean "the database, not the request": retrying later succeeds. The driver
 * classifies some of them as unknown (57P03 during a restart or failover would otherwise pass as
 * permanent and dead-letter whole streams).
 * - class 08: connection exceptions;
 * - 57P01 / 57P02 / 57P03: admin or crash shutdown, cannot connect now (starting up, shutting down);
 * - 53300: too many connections; 53xxx: insufficient resources (disk full, out of memory);
 * - 40001 / 40P01 / 40003: serialization failure, deadlock, statement completion unknown;
 * - 25006: read-only transaction (a client still connected to a demoted primary after a fail-over,
 *   or the database set read-only for maintenance); 25P03: idle-in-transaction timeout;
 * - 57014 / 55P03: statement or lock timeout (or a cancel): the database was busy, not the record bad.
 */
export const isInfrastructureState = (state: string | undefined): boolean =>
  state !== undefined &&
  (state.startsWith("08") ||
    state === "57P01" ||
    state === "57P02" ||
    state === "57P03" ||
    state.startsWith("53") ||
    state === "40001" ||
    state === "40P01" ||
    state === "40003" ||
    state === "25006" ||
    state === "25P03" ||
    state === "57014" ||
    state === "55P03")

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
