/**
 * Sequential partition assignment on PostgreSQL: the core `PartitionAssignmentStore`
 * port over `<prefix>partition_assignment`.
 *
 * `reserve` runs in a transaction (joining the ambient one) that first takes a per-topic
 * advisory lock, so reservations of one topic run one at a time; each later statement reads a
 * fresh READ COMMITTED snapshot that includes every earlier reservation. Partitions therefore
 * fill 0, 1, 2, … to capacity with no gap and no over-fill, however many creations race.
 *
 * @since 0.1.0
 */
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { isSqlError } from "effect/sql/SqlError"
import { fromSqlError, invalid, run } from "./internal/errors.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const table = sql.literal(t.partitionAssignment)

  const existing = (topic: string, ownerId: string) =>
    sql<{ partition: number }>`SELECT partition FROM ${table}
      WHERE topic = ${topic}::text AND owner_id = ${ownerId}::text`.withoutTransform

  return PartitionAssignmentStore.of({
    reserve: ({ maxPerPartition, ownerId, topic }) => {
      if (!Number.isInteger(maxPerPartition) || maxPerPartition < 1) {
        return Effect.fail(
          invalid("partitions.reserve", `maxPerPartition must be an integer >= 1, got ${maxPerPartition}`)
        )
      }
      return sql
        .withTransaction(
          Effect.gen(function* () {
            // Fast path: an owner keeps its partition, no lock needed.
            const [known] = yield* existing(topic, ownerId)
            if (known !== undefined) return { topic, ownerId, partition: known.partition, created: false }
            const [gate] = yield* sql<{
              isolation: string
            }>`SELECT pg_advisory_xact_lock(${t.locks.assignment}, hashtext(${topic}::text)),
            current_setting('transaction_isolation') AS isolation`.withoutTransform
            if (gate!.isolation !== "read committed") {
              return yield* Effect.fail(
                invalid(
                  "partitions.reserve",
                  `needs READ COMMITTED (the lock only helps if later statements see fresh data), the transaction is ${gate!.isolation}`
                )
              )
            }
            // Under the lock: lowest partition below capacity, else the next one after the highest.
            const [row] = yield* sql<{ partition: number; created: boolean }>`
          WITH counts AS (
            SELECT partition, count(*) AS n FROM ${table} WHERE topic = ${topic}::text GROUP BY partition
          ), chosen AS (
            SELECT min(g) AS partition
              FROM generate_series(0, COALESCE((SELECT max(partition) FROM counts), -1) + 1) AS g
              LEFT JOIN counts c ON c.partition = g
             WHERE COALESCE(c.n, 0) < ${maxPerPartition}::int4
          ), inserted AS (
            INSERT INTO ${table} (topic, owner_id, partition)
            SELECT ${topic}::text, ${ownerId}::text, chosen.partition FROM chosen
            ON CONFLICT (topic, owner_id) DO NOTHING
            RETURNING partition
          )
          SELECT partition, true AS created FROM inserted`.withoutTransform
            if (row !== undefined) return { topic, ownerId, partition: row.partition, created: true }
            // Raced with another reservation of the same owner that committed meanwhile.
            const [again] = yield* existing(topic, ownerId)
            return { topic, ownerId, partition: again!.partition, created: false }
          })
        )
        .pipe(
          Effect.mapError((error) => (isSqlError(error) ? fromSqlError("partitions.reserve")(error) : error)),
          Effect.withSpan("pg.partitions.reserve")
        )
    },
    lookup: (topic, ownerId) =>
      existing(topic, ownerId).pipe(
        Effect.map(([row]) => (row === undefined ? Option.none<number>() : Option.some(row.partition))),
        run("partitions.lookup")
      ),
    counts: (topic) =>
      sql<{ partition: number; n: number }>`SELECT partition, count(*)::int AS n FROM ${table}
        WHERE topic = ${topic}::text GROUP BY partition ORDER BY partition`.withoutTransform.pipe(
        Effect.map((rows) => new Map(rows.map((r) => [r.partition, r.n] as const))),
        run("partitions.counts")
      )
  })
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<PartitionAssignmentStore, never, SqlClient.SqlClient | PgTables> =
  Layer.effect(PartitionAssignmentStore)(make)
