/**
 * How a PostgreSQL failure becomes the port's typed `OutboxStoreError`, and which failures are
 * retriable. Public so that doubles of the database (`@effect-outbox/testing`'s in-memory
 * outage) and other stores classify exactly as this adapter does; the rules live in
 * `internal/errors.ts`, beside the adapter's other SQL helpers.
 *
 * @since 0.1.0
 */
import type { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { SqlError } from "effect/sql/SqlError"
import * as internal from "./internal/errors.ts"

/**
 * A database failure as the port's typed error, naming the operation. Connection loss,
 * serialization failures, deadlocks, timeouts and the infrastructure SQLSTATEs (class 08, 57P0x,
 * 53xxx) are retriable.
 *
 * @since 0.1.0
 * @category errors
 */
export const fromSqlError: (operation: string) => (error: SqlError) => OutboxStoreError = internal.fromSqlError

/**
 * Whether asking again later can succeed: the driver says so, the SQLSTATE is an infrastructure
 * one, or the connection failed.
 *
 * @since 0.1.0
 * @category errors
 */
export const isRetriable: (error: SqlError) => boolean = internal.isRetriable

/**
 * The SQLSTATE of the underlying PostgreSQL error, when the driver kept it.
 *
 * @since 0.1.0
 * @category errors
 */
export const sqlState: (error: SqlError) => string | undefined = internal.sqlState
