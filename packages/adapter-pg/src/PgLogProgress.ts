/**
 * The log relay's durable progress on PostgreSQL (`LogLease.progress`): a row per slot in the
 * outbox schema (`<schema>.<prefix>log_progress`, migration 9) holding the highest commit
 * position whose events the broker acknowledged. The relay saves it after each acknowledged
 * window and before the slot's confirm. A server restart rewinds a slot to its last saved
 * position; the windows it then gives again are confirmed without being re-sent.
 *
 * The row also keeps the newest published event id (migration 11). When the setup step re-creates
 * the slot it marks the row, and the relay's next lease reads the gap (the events the new slot
 * starts past) back from the event table (`backstop`) before it reads the slot. A transaction
 * too large to hold is relayed in parts; the row then also names it (its commit position) and
 * how many of its events are on the broker (migration 13), saved durably per part.
 *
 * `PgLogOutbox.layer` includes it. On its own it decorates a `LogSource` in context:
 *
 * ```ts
 * const source = PgLogProgress.layer({ slot }).pipe(Layer.provide(PgLogSource.layer({ slot })))
 * ```
 *
 * @since 0.1.0
 */
import {
  type LogBackstop,
  type LogPart,
  LogSource,
  LogSourceError,
  type LogProgress as Progress
} from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { fromSqlError } from "./internal/errors.ts"
import * as LogGap from "./internal/logGap.ts"
import * as LogProgress from "./internal/logProgress.ts"
import type { Exec } from "./internal/logSetup.ts"
import { DEFAULT_SLOT } from "./internal/logSetup.ts"
import * as PgTables from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The slot whose progress this is (the log source's). Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  /** The outbox schema the progress table lives in. Default `outbox`. */
  readonly schema?: string | undefined
  /** Default `outbox_`. */
  readonly tablePrefix?: string | undefined
  /**
   * A re-created slot's gap is read back from the event table from the newest published event's
   * enqueue time less this: longer than a transaction stays open after taking its ids, plus the
   * writers' clock skew. Default 5 minutes (retention's `sealAfter` rests on the same bound).
   */
  readonly gapMargin?: Duration.Input | undefined
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
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const slot = options.slot ?? DEFAULT_SLOT
    const tables = yield* PgTables.make(options).pipe(Effect.mapError(failed("log.progress.options")))
    const table = LogProgress.progressTable(tables)
    const read = LogProgress.readSql(table)
    const save = LogProgress.saveSql(table)
    const readPart = LogProgress.readPartSql(table)
    const savePart = LogProgress.savePartSql(table)
    return {
      published: sql.unsafe<{ position: string }>(read, [slot]).pipe(
        Effect.map((rows) => rows[0]?.position ?? null),
        Effect.mapError(sqlFailed("log.progress.read")),
        Effect.withSpan("pg.log.progress.read", undefined, { captureStackTrace: false })
      ),
      save: (upTo: string, newest?: string) =>
        sql
          .unsafe(save, [slot, upTo, newest ?? null])
          .pipe(
            Effect.asVoid,
            Effect.mapError(sqlFailed("log.progress.save")),
            Effect.withSpan("pg.log.progress.save", undefined, { captureStackTrace: false })
          ),
      compare: LogProgress.compareLsn,
      publishedPart: sql.unsafe<{ commit: string; done: number }>(readPart, [slot]).withoutTransform.pipe(
        Effect.map((rows): LogPart | null =>
          rows[0] === undefined ? null : { transaction: rows[0].commit, done: Number(rows[0].done) }
        ),
        Effect.mapError(sqlFailed("log.progress.read"))
      ),
      savePart: (part: LogPart, newest?: string) =>
        sql
          .unsafe(savePart, [slot, part.transaction, part.done, newest ?? null])
          .pipe(
            Effect.asVoid,
            Effect.mapError(sqlFailed("log.progress.save")),
            Effect.withSpan("pg.log.progress.savePart", undefined, { captureStackTrace: false })
          )
    } satisfies Progress
  })

/**
 * The event table as the backstop of a re-created slot (`LogLease.backstop`): the gap the setup
 * step marked when it created the slot, or that of a slot found ahead of the relay's own progress
 * (created by hand), read back by time.
 *
 * @since 0.1.0
 * @category constructors
 */
export const backstop = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const slot = options.slot ?? DEFAULT_SLOT
    const tables = yield* PgTables.make(options).pipe(Effect.mapError(failed("log.gap.options")))
    const table = LogProgress.progressTable(tables)
    const margin = Duration.toMillis(Duration.fromInputUnsafe(options.gapMargin ?? "5 minutes"))
    const gapSql = LogGap.gapSql(table)
    const closeSql = LogGap.closeSql(table)
    const detectSql = LogGap.detectSql(table)
    const backstop: LogBackstop = {
      // The setup step's mark; else a slot ahead of the relay's own progress.
      gap: sql.unsafe<LogGap.GapRow>(gapSql, [slot]).withoutTransform.pipe(
        Effect.flatMap((rows) =>
          rows.length > 0 ? Effect.succeed(rows) : sql.unsafe<LogGap.GapRow>(detectSql, [slot]).withoutTransform
        ),
        Effect.map((rows) => (rows[0] === undefined ? null : LogGap.gapOf(rows[0], margin))),
        Effect.mapError(sqlFailed("log.gap.read"))
      ),
      // One read-only snapshot for the whole gap, on a connection of its own for the scope.
      open: (gap) =>
        Effect.gen(function* () {
          const connection = yield* sql.reserve
          const exec: Exec = (text, params) => connection.execute(text, params, undefined)
          yield* exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", [])
          yield* Effect.addFinalizer(() => Effect.ignore(exec("ROLLBACK", [])))
          yield* exec("SELECT 1", []) // the snapshot is taken here, at the transaction's first query
          return (after: string | undefined, limit: number) =>
            LogGap.readPage(exec, tables.logEvent, gap, after, limit).pipe(Effect.mapError(sqlFailed("log.gap.read")))
        }).pipe(Effect.mapError(sqlFailed("log.gap.open"))),
      close: (gap) =>
        sql.unsafe(closeSql, [slot, gap.start]).pipe(Effect.asVoid, Effect.mapError(sqlFailed("log.gap.close")))
    }
    return backstop
  })

/**
 * Gives every lease of the `LogSource` in context this slot's durable progress, and the event
 * table as the backstop of a re-created slot.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<LogSource, LogSourceError, LogSource | SqlClient.SqlClient> =>
  Layer.effect(LogSource)(
    Effect.gen(function* () {
      const source = yield* LogSource
      const progress = yield* make(options)
      const gaps = yield* backstop(options)
      return LogSource.of({
        ...source,
        acquire: Effect.map(
          source.acquire,
          Option.map((lease) => ({ ...lease, progress, backstop: gaps }))
        )
      })
    })
  )
