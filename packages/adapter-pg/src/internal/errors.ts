import { type FailureKind, StoreError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"

/** SQLSTATE of the underlying PostgreSQL error, when the driver kept it. */
export const sqlState = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/**
 * SQLSTATEs that describe the database rather than the statement: asking again later succeeds.
 *
 * - class 08: connection exceptions; class 53: insufficient resources (53300 too many connections);
 * - 57P01 / 57P02 / 57P03: admin or crash shutdown, cannot connect now (starting up, shutting down);
 * - 40001 / 40P01 / 40003: serialization failure, deadlock, statement completion unknown;
 * - 25006: read-only transaction (a client still on a demoted primary after a fail-over, or the
 *   database set read-only for maintenance); 25P03: idle-in-transaction timeout;
 * - 57014 / 55P03: statement or lock timeout (or a cancel): the database was busy, not the request bad.
 */
const infrastructureStates: ReadonlySet<string> = new Set([
  "57P01",
  "57P02",
  "57P03",
  "40001",
  "40P01",
  "40003",
  "25006",
  "25P03",
  "57014",
  "55P03"
])

/** Whether a SQLSTATE is one of the database's own (see the list above). */
export const isInfrastructureState = (state: string | undefined): boolean =>
  state !== undefined && (state.startsWith("08") || state.startsWith("53") || infrastructureStates.has(state))

/**
 * `unavailable` when the database, not the request, failed: the connection, or an infrastructure
 * SQLSTATE (the driver files several of them, such as 57P01 or 25006, as unknown), or anything the
 * driver marks retryable (deadlocks, timeouts). Every other failure is `permanent`.
 */
export const kindOf = (error: SqlError): FailureKind =>
  error.isRetryable || error.reason._tag === "ConnectionError" || isInfrastructureState(sqlState(error))
    ? "unavailable"
    : "permanent"

/** Retriable: any kind but `permanent`. */
export const isRetriable = (error: SqlError): boolean => kindOf(error) !== "permanent"

/**
 * A database failure as the port's typed error, naming the operation, its kind decided by
 * {@link kindOf}.
 */
export const fromSqlError =
  (operation: string) =>
  (error: SqlError): StoreError => {
    const state = sqlState(error)
    // The driver's own message is generic ("Query failed"); PostgreSQL's is in the cause.
    const cause = error.reason.cause as { readonly message?: unknown } | undefined
    const detail =
      typeof cause?.message === "string" && cause.message !== error.message
        ? `${error.message}: ${cause.message}`
        : error.message
    return new StoreError({
      operation,
      reason: `${error.reason._tag}${state === undefined ? "" : ` (SQLSTATE ${state})`}: ${detail}`,
      kind: kindOf(error),
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

export const invalid = (operation: string, reason: string): StoreError =>
  new StoreError({ operation, reason, kind: "permanent" })
