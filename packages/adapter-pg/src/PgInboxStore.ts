/**
 * Processed-message records on PostgreSQL: the core `InboxStore` port over `<prefix>processed`,
 * range-partitioned on each record's time (`InboxStore.recordTime`, part of the key), so
 * retention drops whole partitions and never deletes a row (no dead tuples, no vacuum debt).
 *
 * `record` is `INSERT … ON CONFLICT (consumer, identity, event_ms) DO NOTHING RETURNING`, guarded
 * in the same statement by the inbox horizon (the oldest time still remembered): a conflict on
 * exactly the processed key is `"duplicate"` and, unlike a raised unique violation, leaves the
 * caller's transaction usable (a raised error would abort it); a time below the horizon is
 * `"expired"` and writes nothing. Any other failure is an error. `recordBatch` is the same
 * statement over `unnest` of three arrays: one round trip for a whole batch, `RETURNING` the keys
 * it inserted. It inserts in key order, so two batches that overlap wait for each other instead
 * of deadlocking.
 *
 * `purge(olderThan)` creates partitions `ahead` of now, raises the horizon over every partition
 * that ended by `olderThan` and drops them (detached concurrently: records into the other
 * partitions never wait). A record whose time has no partition yet (further ahead than `ahead`:
 * a producer clock far off, or no retention round for that long) fails with an error that says so.
 * A concurrent transaction holding the same key makes `record` wait for it: `"duplicate"` if it
 * commits, `"recorded"` if it rolls back.
 *
 * `record` is on the hot path of `Inbox.processOnce` (one per consumed message), so inside a
 * transaction it sends its fixed statement text straight to the transaction's connection
 * (`SqlClient.transactionService`, prepared once per connection by the driver) instead of building
 * an effect/sql `Statement` each time: no per-call compile and no statement span, which cost about
 * as much Node CPU as the round trip's own socket work (docs/performance.md, scenario 4). The
 * round trip itself stays: @effect/sql-pg sends one statement per extended-protocol cycle and does
 * not pipeline a transaction's statements, so the record cannot travel with BEGIN.
 *
 * @since 0.1.0
 */

import * as PgTypes from "@effect/sql-pg/PgTypes"
import { StoreError } from "@effect-outbox/core/Errors"
import { InboxStore, keyTime, type ProcessedKey, type RecordOutcome } from "@effect-outbox/core/InboxStore"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { fromSqlError, run, sqlState } from "./internal/errors.ts"
import { executor } from "./internal/fixedStatement.ts"
import { fromHorizon, InboxTable } from "./internal/inboxRetention.ts"
import { DEFAULT_AHEAD_MS, DEFAULT_SPAN_MS } from "./internal/inboxTable.ts"
import { PgTables } from "./PgTables.ts"

const textArray = (values: ReadonlyArray<string>): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, PgTypes.OID.text))

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The time one partition covers (the granularity records are forgotten in). Default 1 day. */
  readonly partitionSpan?: Duration.Input | undefined
  /** How far ahead of now partitions exist. Default 2 days (at least one span). */
  readonly ahead?: Duration.Input | undefined
}

const millis = (input: Duration.Input | undefined, fallback: number) =>
  input === undefined ? fallback : Math.trunc(Duration.toMillis(Duration.fromInputUnsafe(input)))

/**
 * A record whose time has no partition (23514): the partitions ahead ran out because no inbox
 * retention round ran for that long, or a producer's clock is that far ahead. Retriable: the
 * consumer waits for the partition (a round creates it) instead of dead-lettering.
 */
const noPartition =
  (operation: string) =>
  (error: SqlError): StoreError =>
    sqlState(error) === "23514"
      ? new StoreError({
          operation,
          reason:
            `no inbox partition for this record's time (${fromSqlError(operation)(error).reason}): partitions are ` +
            "created ahead by the inbox retention rounds (OutboxRuntime, Retention.startInbox, or InboxStore.purge); " +
            "run one, and check the producers' clocks",
          kind: "unavailable",
          cause: error
        })
      : fromSqlError(operation)(error)

// Without its one row nothing can be recorded, and "nothing recorded" must not read as a duplicate.
const missingHorizon = (operation: string) =>
  new StoreError({
    operation,
    reason: "the inbox horizon row is missing (<prefix>inbox_horizon, made by migration 12): nothing was recorded",
    kind: "permanent"
  })

const outcome = (recorded: boolean, at: number, horizon: number): RecordOutcome =>
  recorded ? "recorded" : at < horizon ? "expired" : "duplicate"

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeWith = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    const spanMs = Math.max(1000, millis(options.partitionSpan, DEFAULT_SPAN_MS))
    const aheadMs = Math.max(spanMs, millis(options.ahead, DEFAULT_AHEAD_MS))
    const processed = sql.literal(t.processed)
    const horizonTable = sql.literal(t.inboxHorizon)
    const table = InboxTable(sql, t)
    // Table names are validated identifiers (PgTables); keys and times are bound parameters.
    // A timeless key is kept at the start of its recording's span and looked up in every partition.
    const recordSql = (timeless: boolean) => `WITH h AS (SELECT remembered_from_ms AS ms FROM ${t.inboxHorizon}),
      ins AS (
        INSERT INTO ${t.processed} (consumer, identity, event_ms, processed_at)
        SELECT $1::text, $2::text, $3::bigint, $4 FROM h WHERE $3::bigint >= h.ms${
          timeless
            ? `
          AND NOT EXISTS (SELECT 1 FROM ${t.processed} p WHERE p.consumer = $1::text AND p.identity = $2::text)`
            : ""
        }
        ON CONFLICT (consumer, identity, event_ms) DO NOTHING
        RETURNING 1)
      SELECT (SELECT count(*) FROM ins)::int AS recorded, h.ms::text AS horizon FROM h`
    const recordText = recordSql(false)
    const recordTimelessText = recordSql(true)
    const timeOf = (key: ProcessedKey, now: number) => {
      const at = keyTime(key)
      return at === undefined ? { at: now - (now % spanMs), timeless: true } : { at, timeless: false }
    }
    const recordFailed = noPartition("inbox.record")
    const execute = executor(sql)
    const keyText = (consumer: string, identity: string, at: string | number) =>
      `${consumer}\u0000${identity}\u0000${at}`
    return InboxStore.of({
      record: (key, now) => {
        const { at, timeless } = timeOf(key, now)
        const text = timeless ? recordTimelessText : recordText
        return execute(text, [key.consumer, key.identity, String(at), PgTypes.timestamptz(now)]).pipe(
          Effect.mapError(recordFailed),
          Effect.flatMap((rows) => {
            const row = rows[0] as { recorded: number; horizon: string } | undefined
            return row === undefined
              ? Effect.fail(missingHorizon("inbox.record"))
              : Effect.succeed(outcome(row.recorded === 1, at, fromHorizon(row.horizon)))
          })
        )
      },
      recordBatch: (keys, now) => {
        if (keys.length === 0) return Effect.succeed([])
        const placed = keys.map((key) => timeOf(key, now))
        const times = placed.map((p) => p.at)
        return sql<{
          consumer: string | null
          identity: string | null
          event_ms: string | null
          horizon: string | null
        }>`
          WITH h AS (SELECT remembered_from_ms AS ms FROM ${horizonTable}),
          ins AS (
            INSERT INTO ${processed} (consumer, identity, event_ms, processed_at)
            SELECT k.consumer, k.identity, k.event_ms, ${PgTypes.timestamptz(now)}
              FROM unnest(${textArray(keys.map((k) => k.consumer))}::text[],
                          ${textArray(keys.map((k) => k.identity))}::text[],
                          ${textArray(times.map(String))}::text[]::bigint[],
                          ${textArray(placed.map((p) => String(p.timeless)))}::text[]::boolean[])
                   AS k(consumer, identity, event_ms, timeless), h
             WHERE k.event_ms >= h.ms
               AND (NOT k.timeless OR NOT EXISTS (
                     SELECT 1 FROM ${processed} p WHERE p.consumer = k.consumer AND p.identity = k.identity))
             ORDER BY k.consumer, k.identity, k.event_ms
            ON CONFLICT (consumer, identity, event_ms) DO NOTHING
            RETURNING consumer, identity, event_ms)
          SELECT i.consumer, i.identity, i.event_ms::text AS event_ms, NULL::text AS horizon FROM ins i
          UNION ALL SELECT NULL, NULL, NULL, h.ms::text FROM h`.withoutTransform.pipe(
          Effect.mapError(noPartition("inbox.recordBatch")),
          Effect.flatMap((rows) => {
            // Each inserted key comes back once; a key repeated in `keys` is recorded the first time.
            const inserted = new Set<string>()
            let horizon: number | undefined
            for (const row of rows) {
              if (row.consumer === null) horizon = fromHorizon(row.horizon)
              else inserted.add(keyText(row.consumer, row.identity!, row.event_ms!))
            }
            if (horizon === undefined) return Effect.fail(missingHorizon("inbox.recordBatch"))
            return Effect.succeed(
              keys.map((key, i) =>
                outcome(inserted.delete(keyText(key.consumer, key.identity, times[i]!)), times[i]!, horizon)
              )
            )
          }),
          Effect.withSpan("pg.inbox.recordBatch")
        )
      },
      exists: (key) =>
        sql<{ found: number }>`SELECT 1 AS found FROM ${processed}
          WHERE consumer = ${key.consumer}::text AND identity = ${key.identity}::text LIMIT 1`.withoutTransform.pipe(
          Effect.map((rows) => rows.length > 0),
          run("inbox.exists")
        ),
      purge: (olderThan) =>
        Effect.gen(function* () {
          yield* table.createAhead(spanMs, aheadMs)
          return yield* table.forget(olderThan)
        }).pipe(run("inbox.purge")),
      horizon: table.horizon.pipe(run("inbox.horizon"))
    })
  })

/**
 * With the default partition span (1 day) and ahead (2 days).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = makeWith()

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<InboxStore, never, SqlClient.SqlClient | PgTables> = Layer.effect(InboxStore)(make)

/**
 * {@link layer} with other partition spans.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options: Options): Layer.Layer<InboxStore, never, SqlClient.SqlClient | PgTables> =>
  Layer.effect(InboxStore)(makeWith(options))
