/**
 * Processed-message records on PostgreSQL: the core `InboxStore` port over `<prefix>processed`.
 *
 * `record` is `INSERT … ON CONFLICT (consumer, identity) DO NOTHING RETURNING`: a conflict on
 * exactly the processed key is `"duplicate"` and, unlike a raised unique violation, leaves the
 * caller's transaction usable (a raised error would abort it). Any other failure is an error.
 * `recordBatch` is the same statement over `unnest` of two text arrays: one round trip for a
 * whole batch, `RETURNING` the keys it inserted. It inserts in key order, so two batches that
 * overlap wait for each other instead of deadlocking.
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
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import { fromSqlError, run } from "./internal/errors.ts"
import { executor } from "./internal/fixedStatement.ts"
import { PgTables } from "./PgTables.ts"

const textArray = (values: ReadonlyArray<string>): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, PgTypes.OID.text))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const processed = sql.literal(t.processed)
  // Table names are validated identifiers (PgTables); the key and the time are bound parameters.
  const recordText = `INSERT INTO ${t.processed} (consumer, identity, processed_at)
    VALUES ($1::text, $2::text, $3)
    ON CONFLICT (consumer, identity) DO NOTHING
    RETURNING 1 AS recorded`
  const recordFailed = fromSqlError("inbox.record")
  const execute = executor(sql)
  return InboxStore.of({
    record: (key, now) =>
      Effect.mapBoth(execute(recordText, [key.consumer, key.identity, PgTypes.timestamptz(now)]), {
        onFailure: recordFailed,
        onSuccess: (found) => (found.length === 1 ? ("recorded" as const) : ("duplicate" as const))
      }),
    recordBatch: (keys, now) =>
      keys.length === 0
        ? Effect.succeed([])
        : sql<{ consumer: string; identity: string }>`INSERT INTO ${processed} (consumer, identity, processed_at)
            SELECT k.consumer, k.identity, ${PgTypes.timestamptz(now)}
              FROM unnest(${textArray(keys.map((k) => k.consumer))}::text[],
                          ${textArray(keys.map((k) => k.identity))}::text[]) AS k(consumer, identity)
             ORDER BY k.consumer, k.identity
            ON CONFLICT (consumer, identity) DO NOTHING
            RETURNING consumer, identity`.withoutTransform.pipe(
            Effect.map((rows) => {
              // Each inserted key comes back once; a key repeated in `keys` is recorded the first time.
              const inserted = new Set(rows.map((row) => `${row.consumer}\u0000${row.identity}`))
              return keys.map((key) =>
                inserted.delete(`${key.consumer}\u0000${key.identity}`) ? ("recorded" as const) : ("duplicate" as const)
              )
            }),
            run("inbox.recordBatch")
          ),
    exists: (key) =>
      sql<{ found: number }>`SELECT 1 AS found FROM ${processed}
        WHERE consumer = ${key.consumer}::text AND identity = ${key.identity}::text`.withoutTransform.pipe(
        Effect.map((rows) => rows.length > 0),
        run("inbox.exists")
      ),
    purge: (olderThan, limit) =>
      limit <= 0
        ? Effect.succeed(0)
        : sql<{ n: number }>`WITH victims AS (
              SELECT consumer, identity FROM ${processed}
               WHERE processed_at < ${PgTypes.timestamptz(olderThan)}
               ORDER BY processed_at
               LIMIT ${Math.trunc(limit)}
                 FOR UPDATE SKIP LOCKED
            ), deleted AS (
              DELETE FROM ${processed} p USING victims v
               WHERE p.consumer = v.consumer AND p.identity = v.identity
              RETURNING 1
            )
            SELECT count(*)::int AS n FROM deleted`.withoutTransform.pipe(
            Effect.map(([row]) => row!.n),
            run("inbox.purge")
          )
  })
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<InboxStore, never, SqlClient.SqlClient | PgTables> = Layer.effect(InboxStore)(make)
