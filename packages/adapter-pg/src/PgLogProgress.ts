/**
 * The log relay's durable progress on PostgreSQL (`LogLease.progress`): a row per slot in the
 * outbox schema (`<schema>.<prefix>log_progress`, migration 9) holding the highest commit
 * position whose events the broker acknowledged. The relay saves it after each acknowledged
 * window and before the slot's confirm. A server restart rewinds a slot to its last saved
 * position; the windows it then gives again are confirmed without being re-sent.
 *
 * `PgLogOutbox.layer` includes it. On its own it decorates a `LogSource` in context:
 *
 * ```ts
 * const source = PgLogProgress.layer({ slot }).pipe(Layer.provide(PgLogSource.layer({ slot })))
 * ```
 *
 * @since 0.3.0
 */
import { LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { fromSqlError } from "./internal/errors.ts"
import * as LogProgress from "./internal/logProgress.ts"
import * as PgTables from "./PgTables.ts"

/**
 * @since 0.3.0
 * @category models
 */
export interface Options {
  /** The slot whose progress this is (the log source's). Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  /** The outbox schema the progress table lives in. Default `outbox`. */
  readonly schema?: string | undefined
  /** Default `outbox_`. */
  readonly tablePrefix?: string | undefined
}

const failed = (operation: string) => (error: { readonly message: string }) =>
  new LogSourceError({ operation, reason: error.message, retriable: true })

const sqlFailed = (operation: string) => (error: SqlError) => {
  const mapped = fromSqlError(operation)(error)
  return new LogSourceError({ operation, reason: mapped.reason, retriable: mapped.retriable })
}

/**
 * The progress of one slot, over the pool. Its table comes with the outbox migrations
 * (`PgLogOutbox.setup` runs them).
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const slot = options.slot ?? "effect_outbox_log"
    const tables = yield* PgTables.make(options).pipe(Effect.mapError(failed("log.progress.options")))
    const table = LogProgress.progressTable(tables)
    const read = LogProgress.readSql(table)
    const save = LogProgress.saveSql(table)
    return {
      published: sql.unsafe<{ position: string }>(read, [slot]).pipe(
        Effect.map((rows) => rows[0]?.position ?? null),
        Effect.mapError(sqlFailed("log.progress.read")),
        Effect.withSpan("pg.log.progress.read", undefined, { captureStackTrace: false })
      ),
      save: (upTo: string) =>
        sql
          .unsafe(save, [slot, upTo])
          .pipe(
            Effect.asVoid,
            Effect.mapError(sqlFailed("log.progress.save")),
            Effect.withSpan("pg.log.progress.save", undefined, { captureStackTrace: false })
          ),
      compare: LogProgress.compareLsn
    }
  })

/**
 * Gives every lease of the `LogSource` in context this slot's durable progress.
 *
 * @since 0.3.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<LogSource, LogSourceError, LogSource | SqlClient.SqlClient> =>
  Layer.effect(LogSource)(
    Effect.gen(function* () {
      const source = yield* LogSource
      const progress = yield* make(options)
      return LogSource.of({
        ...source,
        acquire: Effect.map(
          source.acquire,
          Option.map((lease) => ({ ...lease, progress }))
        )
      })
    })
  )
