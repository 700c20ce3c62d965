/**
 * What operators read beyond the `OutboxStore` port: counts per topic, an event's transition
 * history and who processed it, and how many rows a purge would remove. Read-only by
 * construction — every change goes through core's `Transition` (R2.7, R8.1).
 *
 * @since 0.1.0
 */
import { PgTables } from "@effect-outbox/adapter-pg/PgTables"
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

// The relay's working statuses (`Lifecycle.isQueued`), as a SQL list.
const queuedStatuses = Lifecycle.statuses
  .filter(Lifecycle.isQueued)
  .map((s) => `'${s}'`)
  .join(", ")

/**
 * @since 0.1.0
 * @category models
 */
export interface TopicCounts {
  readonly topic: string
  readonly byStatus: { readonly [S in OutboxStatus]?: number }
  readonly oldestPendingCreatedAt: number | null
  readonly staleLeases: number
}

/**
 * One recorded status change (kept when the store records transitions).
 *
 * @since 0.1.0
 * @category models
 */
export interface HistoryEntry {
  readonly from: string
  readonly to: string
  readonly leaseOwner: string | null
  readonly at: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessedBy {
  readonly consumer: string
  readonly identity: string
  readonly processedAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface RecentFailure {
  readonly id: string
  readonly topic: string
  readonly key: string | null
  readonly attempts: number
  readonly lastError: string | null
  readonly updatedAt: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class ReadModel extends Context.Service<
  ReadModel,
  {
    /** Stale leases are judged by the database clock (review M9), whatever the caller's `now`. */
    readonly perTopic: (now: number) => Effect.Effect<ReadonlyArray<TopicCounts>, OutboxStoreError>
    readonly history: (id: string) => Effect.Effect<ReadonlyArray<HistoryEntry>, OutboxStoreError>
    readonly processedBy: (id: string) => Effect.Effect<ReadonlyArray<ProcessedBy>, OutboxStoreError>
    /** The latest `FAILURE` rows (newest first), without their payloads. */
    readonly recentFailures: (
      topic: string | undefined,
      limit: number
    ) => Effect.Effect<ReadonlyArray<RecentFailure>, OutboxStoreError>
    /** Rows `purge` would delete: one of `statuses`, last updated before `olderThan`. */
    readonly countPurgeable: (
      statuses: ReadonlyArray<OutboxStatus>,
      olderThan: number
    ) => Effect.Effect<number, OutboxStoreError>
  }
>()("@effect-outbox/cli/ReadModel") {}

const millis = (value: Date | number | string): number =>
  value instanceof Date ? value.getTime() : typeof value === "number" ? value : new Date(value).getTime()

// The driver's message is generic ("Query failed"); PostgreSQL's own is in the cause.
const failed = (operation: string) => (error: SqlError) => {
  const cause = error.reason.cause as { readonly message?: unknown } | undefined
  const detail = typeof cause?.message === "string" ? cause.message : error.message
  return new OutboxStoreError({
    operation,
    reason: detail.includes("does not exist")
      ? `${detail} (are the outbox tables migrated in this schema? check --schema / OUTBOX_SCHEMA)`
      : detail,
    retriable: error.isRetryable,
    cause: error
  })
}

/**
 * The read model over the PostgreSQL tables of `@effect-outbox/adapter-pg`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPg: Layer.Layer<ReadModel, never, SqlClient.SqlClient | PgTables> = Layer.effect(ReadModel)(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    return {
      perTopic: () =>
        sql
          .unsafe<{ topic: string; status: string; n: number; oldest: Date | null; stale: number }>(
            `SELECT topic, status, count(*)::int AS n,
                  min(created_at) FILTER (WHERE status = 'PENDING') AS oldest,
                  (count(*) FILTER (WHERE status = 'DISPATCHING' AND lease_expires_at < now()))::int AS stale
             FROM ${t.message} GROUP BY topic, status ORDER BY topic, status`,
            []
          )
          .withoutTransform.pipe(
            Effect.map((rows) => {
              const topics = new Map<
                string,
                { byStatus: Record<string, number>; oldest: number | null; stale: number }
              >()
              for (const row of rows) {
                const entry = topics.get(row.topic) ?? { byStatus: {}, oldest: null, stale: 0 }
                entry.byStatus[row.status] = row.n
                if (row.oldest !== null) entry.oldest = millis(row.oldest)
                entry.stale += row.stale
                topics.set(row.topic, entry)
              }
              return [...topics].map(
                ([topic, entry]): TopicCounts => ({
                  topic,
                  byStatus: entry.byStatus,
                  oldestPendingCreatedAt: entry.oldest,
                  staleLeases: entry.stale
                })
              )
            }),
            Effect.mapError(failed("status"))
          ),
      history: (id) =>
        sql
          .unsafe<{ from_status: string; to_status: string; lease_owner: string | null; at: Date }>(
            `SELECT from_status, to_status, lease_owner, at FROM ${t.transition} WHERE event_id = $1::uuid ORDER BY id`,
            [id]
          )
          .withoutTransform.pipe(
            Effect.map((rows) =>
              rows.map(
                (row): HistoryEntry => ({
                  from: row.from_status,
                  to: row.to_status,
                  leaseOwner: row.lease_owner,
                  at: millis(row.at)
                })
              )
            ),
            Effect.mapError(failed("inspect"))
          ),
      processedBy: (id) =>
        sql
          .unsafe<{ consumer: string; identity: string; processed_at: Date }>(
            `SELECT consumer, identity, processed_at FROM ${t.processed} WHERE identity = $1 ORDER BY processed_at`,
            [`event:${id}`]
          )
          .withoutTransform.pipe(
            Effect.map((rows) =>
              rows.map(
                (row): ProcessedBy => ({
                  consumer: row.consumer,
                  identity: row.identity,
                  processedAt: millis(row.processed_at)
                })
              )
            ),
            Effect.mapError(failed("inspect"))
          ),
      recentFailures: (topic, limit) =>
        sql
          .unsafe<{
            id: string
            topic: string
            key: string | null
            attempts: number
            last_error: string | null
            updated_at: Date
          }>(
            `SELECT id::text AS id, topic, key, attempts, last_error, updated_at FROM ${t.message}
            WHERE status = 'FAILURE' AND ($1::text IS NULL OR topic = $1::text)
            ORDER BY seq DESC LIMIT $2::int`,
            [topic ?? null, Math.max(0, Math.trunc(limit))]
          )
          .withoutTransform.pipe(
            Effect.map((rows) =>
              rows.map(
                (row): RecentFailure => ({
                  id: row.id,
                  topic: row.topic,
                  key: row.key,
                  attempts: row.attempts,
                  lastError: row.last_error,
                  updatedAt: millis(row.updated_at)
                })
              )
            ),
            Effect.mapError(failed("status"))
          ),
      countPurgeable: (statuses, olderThan) =>
        sql
          .unsafe<{ n: number }>(
            // the NOT IN (a no-op: purge takes finished statuses only) lets the planner use the
            // adapter's partial (status, updated_at) index, whose predicate it is (migration 3)
            `SELECT count(*)::int AS n FROM ${t.message} WHERE status = ANY (string_to_array($1::text, ',')) AND status NOT IN (${queuedStatuses}) AND updated_at < to_timestamp($2::float8 / 1000)`,
            [statuses.join(","), olderThan]
          )
          .withoutTransform.pipe(
            Effect.map((rows) => rows[0]?.n ?? 0),
            Effect.mapError(failed("purge"))
          )
    }
  })
)
