/**
 * Retention of the log engine's event table, by whole partitions: never a DELETE, so the table
 * leaves no dead rows behind and needs no vacuum beyond freezing.
 *
 * One round of {@link maintain}:
 * 1. creates partitions `ahead` of now (each `partitionSpan` long, starting where the last ends);
 * 2. seals each partition that ended `sealAfter` ago: waits for the transactions still writing
 *    into it (a SHARE lock, which conflicts with inserts), then records the WAL position, which
 *    every event of the partition committed before;
 * 3. drops each sealed partition that ended `retention` ago once the slot has confirmed past its
 *    seal (so every event in it reached the broker): detached concurrently (inserts into the
 *    other partitions never wait), then dropped. With no slot, nothing is dropped: the table is
 *    the backstop for the events a lost slot never delivered.
 *
 * Needs a role that owns the event table (the migration's). {@link layer} runs a round every
 * `interval` in the background; `PgLogOutbox.layer` includes it unless told otherwise.
 *
 * @since 0.1.0
 */
import { LogSourceError } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { LogTable, logError } from "./internal/logRetention.ts"
import { DEFAULT_SLOT } from "./internal/logSetup.ts"
import * as PgTables from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The slot whose confirmed position gates the drops. Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  readonly schema?: string | undefined
  readonly tablePrefix?: string | undefined
  /** How long events are kept after their partition ends. Default 7 days. */
  readonly retention?: Duration.Input | undefined
  /** The time one partition covers. Default 1 hour (at least 1 second). */
  readonly partitionSpan?: Duration.Input | undefined
  /** How far ahead of now partitions exist. Default 1 day: writes go on that long without a round. */
  readonly ahead?: Duration.Input | undefined
  /**
   * How long after its end a partition is sealed: longer than the writers' clock skew and than
   * a transaction stays open after taking its event ids. Default 5 minutes.
   */
  readonly sealAfter?: Duration.Input | undefined
  /** {@link layer}: time between rounds. Default 5 minutes. */
  readonly interval?: Duration.Input | undefined
}

/**
 * What one round did.
 *
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly created: number
  readonly sealed: ReadonlyArray<string>
  readonly dropped: ReadonlyArray<string>
}

const millis = (input: Duration.Input | undefined, fallback: Duration.Input) =>
  Duration.toMillis(Duration.fromInputUnsafe(input ?? fallback))

const resolve = (options: Options) =>
  Effect.gen(function* () {
    const tables = yield* PgTables.make({ schema: options.schema, tablePrefix: options.tablePrefix }).pipe(
      Effect.mapError(
        (error) => new LogSourceError({ operation: "log.retention", reason: error.message, retriable: false })
      )
    )
    const settings = {
      slot: options.slot ?? DEFAULT_SLOT,
      retentionMs: millis(options.retention, "7 days"),
      spanMs: Math.trunc(millis(options.partitionSpan, "1 hour")),
      aheadMs: Math.trunc(millis(options.ahead, "1 day")),
      sealAfterMs: millis(options.sealAfter, "5 minutes")
    }
    if (!(settings.spanMs >= 1000) || !(settings.retentionMs >= 0) || !(settings.aheadMs >= settings.spanMs)) {
      return yield* new LogSourceError({
        operation: "log.retention",
        reason: `partitionSpan must be at least 1 second, retention at least 0 and ahead at least one span (got span ${settings.spanMs} ms, retention ${settings.retentionMs} ms, ahead ${settings.aheadMs} ms)`,
        retriable: false
      })
    }
    return { tables, ...settings }
  })

/**
 * One round: create ahead, seal, drop. Safe to run from several processes at once: creation is
 * serialised, a seal another process made first is kept, and a drop that collides with another
 * process's is left to the next round.
 *
 * @since 0.1.0
 * @category maintenance
 */
export const maintain = (options: Options = {}): Effect.Effect<Report, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const settings = yield* resolve(options)
    const sql = yield* SqlClient.SqlClient
    const table = LogTable(sql, settings.tables)
    const created = yield* table.createAhead(settings.spanMs, settings.aheadMs)
    const now = yield* table.now
    const partitions = yield* table.partitions
    const sealed: Array<string> = []
    for (const p of partitions) {
      if (p.sealed === null && p.to + settings.sealAfterMs <= now && (yield* table.seal(p.name))) sealed.push(p.name)
    }
    const confirmed = yield* table.confirmed(settings.slot)
    const dropped: Array<string> = []
    if (confirmed !== null) {
      for (const p of yield* table.partitions) {
        if (p.sealed !== null && p.to + settings.retentionMs <= now && (yield* table.covers(confirmed, p.sealed))) {
          if (yield* table.drop(p.name, p.detaching)) dropped.push(p.name)
        }
      }
    }
    yield* table.dropOrphans
    return { created, sealed, dropped }
  }).pipe(
    Effect.mapError((error) => (error instanceof LogSourceError ? error : logError(error as SqlError))),
    Effect.withSpan("PgLogRetention.maintain")
  )

/**
 * Runs {@link maintain} now and every `interval` while the layer lives; a failed round is logged
 * and the next one tries again.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<never, never, SqlClient.SqlClient> =>
  Layer.effectDiscard(
    Effect.forkScoped(
      maintain(options).pipe(
        Effect.tap((report) =>
          report.dropped.length === 0
            ? Effect.void
            : Effect.logInfo(
                `log retention: dropped ${report.dropped.length} partition(s): ${report.dropped.join(", ")}`
              )
        ),
        Effect.catch((error: LogSourceError) => Effect.logWarning(`log retention: ${error.message}`)),
        Effect.repeat(Schedule.spaced(Duration.fromInputUnsafe(options.interval ?? "5 minutes")))
      )
    )
  )
