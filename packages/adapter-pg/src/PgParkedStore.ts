/**
 * Durable parking on PostgreSQL: the core `ParkedStore` port over `<prefix>parked` (migration
 * `6_parked`): one row per parked record position, never its payload. `park` is
 * `INSERT … ON CONFLICT DO NOTHING` (a redelivered parked record parks once), after checking the
 * group's bound (a soft bound: two members parking at once may pass it by a batch).
 *
 * @since 0.1.0
 */
import * as PgTypes from "@effect/sql-pg/PgTypes"
import {
  defaultMaxRecords,
  type ParkedKey,
  ParkedLimitError,
  ParkedStore,
  type ReleaseTarget
} from "@effect-outbox/core/ParkedStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import { run } from "./internal/errors.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Parked records per consumer group at most (default 100,000). */
  readonly maxRecords?: number | undefined
}

const textArray = (values: ReadonlyArray<string>): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, PgTypes.OID.text))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    const parked = sql.literal(t.parked)
    const releases = sql.literal(t.parkedRelease)
    const maxRecords = Math.max(1, options.maxRecords ?? defaultMaxRecords)
    return ParkedStore.of({
      park: (consumer, positions) =>
        positions.length === 0
          ? Effect.void
          : Effect.gen(function* () {
              const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${parked}
                WHERE consumer = ${consumer}::text`.withoutTransform.pipe(run("parked.count"))
              if (row!.n + positions.length > maxRecords) {
                return yield* new ParkedLimitError({ consumer, limit: maxRecords })
              }
              yield* sql`INSERT INTO ${parked} (consumer, topic, partition, record_offset, key)
                SELECT ${consumer}::text, p.topic, p.partition::int, p.record_offset::bigint, p.key
                  FROM unnest(${textArray(positions.map((p) => p.topic))}::text[],
                              ${textArray(positions.map((p) => String(p.partition)))}::text[],
                              ${textArray(positions.map((p) => p.offset))}::text[],
                              ${textArray(positions.map((p) => p.key))}::text[])
                       AS p(topic, partition, record_offset, key)
                ON CONFLICT DO NOTHING`.withoutTransform.pipe(run("parked.park"))
            }),
      list: (filter = {}) =>
        sql<{
          consumer: string
          topic: string
          partition: number
          key: string
          offsets: Array<string>
          parked_at: string
        }>`
          SELECT consumer, topic, partition, key,
                 array_agg(record_offset::text ORDER BY record_offset) AS offsets,
                 (extract(epoch FROM min(parked_at)) * 1000)::bigint::text AS parked_at
            FROM ${parked}
           WHERE (${filter.consumer ?? null}::text IS NULL OR consumer = ${filter.consumer ?? null}::text)
             AND (${filter.topic ?? null}::text IS NULL OR topic = ${filter.topic ?? null}::text)
             AND (${filter.partition ?? null}::int IS NULL OR partition = ${filter.partition ?? null}::int)
           GROUP BY consumer, topic, partition, key
           ORDER BY consumer, topic, partition, min(record_offset)`.withoutTransform.pipe(
          Effect.map((rows) =>
            rows.map(
              (r): ParkedKey => ({
                consumer: r.consumer,
                topic: r.topic,
                partition: r.partition,
                key: r.key,
                offsets: r.offsets,
                parkedAt: Number(r.parked_at)
              })
            )
          ),
          run("parked.list")
        ),
      requestRelease: (target) =>
        sql`INSERT INTO ${releases} (consumer, topic, partition, key)
            VALUES (${target.consumer}::text, ${target.topic}::text, ${target.partition}::int, ${target.key}::text)
            ON CONFLICT DO NOTHING`.withoutTransform.pipe(Effect.asVoid, run("parked.requestRelease")),
      releaseRequests: (consumer) =>
        sql<ReleaseTarget>`SELECT consumer, topic, partition, key FROM ${releases}
            WHERE consumer = ${consumer}::text ORDER BY requested_at`.withoutTransform.pipe(
          Effect.map((rows) => rows.map((r) => ({ ...r }))),
          run("parked.releaseRequests")
        ),
      clearRelease: (target) =>
        sql`DELETE FROM ${releases} WHERE consumer = ${target.consumer}::text AND topic = ${target.topic}::text
              AND partition = ${target.partition}::int AND key = ${target.key}::text`.withoutTransform.pipe(
          Effect.asVoid,
          run("parked.clearRelease")
        ),
      remove: (consumer, positions) =>
        positions.length === 0
          ? Effect.void
          : sql`DELETE FROM ${parked} d
                 USING unnest(${textArray(positions.map((p) => p.topic))}::text[],
                              ${textArray(positions.map((p) => String(p.partition)))}::text[],
                              ${textArray(positions.map((p) => p.offset))}::text[]) AS p(topic, partition, record_offset)
                WHERE d.consumer = ${consumer}::text AND d.topic = p.topic
                  AND d.partition = p.partition::int AND d.record_offset = p.record_offset::bigint`.withoutTransform.pipe(
              Effect.asVoid,
              run("parked.remove")
            )
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<ParkedStore, never, SqlClient.SqlClient | PgTables> =>
  Layer.effect(ParkedStore)(make(options))
