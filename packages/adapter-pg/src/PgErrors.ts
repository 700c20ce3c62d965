/**
 * How a PostgreSQL failure becomes the port's typed `StoreError`, and which failures are the
 * database's own (`unavailable`: wait, count no attempt) rather than the request's (`permanent`).
 * The list of infrastructure SQLSTATEs lives here, once. Public so that doubles of the database
 * (`@effect-outbox/testing`'s in-memory outage) and other stores classify exactly as this adapter
 * does, and so a consumer whose handler runs its own SQL can treat those failures as the
 * database's too (`isInfrastructure`).
 *
 * @since 0.1.0
 */
import * as Consumer from "@effect-outbox/core/Consumer"
import type { FailureKind, StoreError } from "@effect-outbox/core/Errors"
import { isSqlError, type SqlError } from "effect/sql/SqlError"
import * as internal from "./internal/errors.ts"

/**
 * A database failure as the port's typed error, naming the operation, with its kind from
 * {@link kindOf}.
 *
 * @since 0.1.0
 * @category errors
 */
export const fromSqlError: (operation: string) => (error: SqlError) => StoreError = internal.fromSqlError

/**
 * `unavailable` when the database rather than the request failed: a lost connection, anything
 * the driver marks retryable (deadlock, serialization failure, lock or statement timeout), or an
 * infrastructure SQLSTATE (see {@link isInfrastructureState}); otherwise `permanent`.
 *
 * @since 0.1.0
 * @category errors
 */
export const kindOf: (error: SqlError) => FailureKind = internal.kindOf

/**
 * Whether a SQLSTATE describes the database rather than the statement: class 08 (connection),
 * class 53 (insufficient resources), 57P01-3 (shutting down, starting up), 40001, 40P01, 40003
 * (serialization, deadlock, completion unknown), 25006 (read-only: a demoted primary after a
 * fail-over), 25P03, 57014 and 55P03 (idle, statement and lock timeouts).
 *
 * @since 0.1.0
 * @category errors
 */
export const isInfrastructureState: (state: string | undefined) => boolean = internal.isInfrastructureState

/**
 * Whether asking again later can succeed: any kind but `permanent`.
 *
 * @since 0.1.0
 * @category errors
 */
export const isRetriable: (error: SqlError) => boolean = internal.isRetriable

/**
 * A consumer's infrastructure test (`isInfrastructure` option) for handlers that run their own
 * SQL: an `SqlError` of kind `unavailable` (the handler's query on a database that is down,
 * read-only or failing over) waits with the partition instead of spending the record's attempts;
 * any other error is decided by `Consumer.defaultIsInfrastructure`.
 *
 * @since 0.1.0
 * @category errors
 */
export const isInfrastructure = (error: unknown): boolean =>
  isSqlError(error) ? internal.kindOf(error) === "unavailable" : Consumer.defaultIsInfrastructure(error)

/**
 * The SQLSTATE of the underlying PostgreSQL error, when the driver kept it.
 *
 * @since 0.1.0
 * @category errors
 */
export const sqlState: (error: SqlError) => string | undefined = internal.sqlState
