/**
 * The write side of the log engine: puts events into the log inside the ambient transaction (on
 * PostgreSQL, an INSERT into the insert-only event table, which the slot reads from the WAL), so
 * they commit or roll back with it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { StoreError } from "./Errors.ts"
import type { LogMessage } from "./LogRecord.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class LogWriter extends Context.Service<
  LogWriter,
  {
    /** Writes the events, in order, in the ambient transaction (or its own when there is none). */
    readonly emit: (messages: ReadonlyArray<LogMessage>) => Effect.Effect<void, StoreError>
  }
>()("@effect-outbox/core/LogWriter") {}
