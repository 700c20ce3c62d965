/**
 * The core `ReadModel` port over the tables of this package: what the operator CLI and the
 * dashboard read beyond `OutboxStore`. Read-only; each call is one statement.
 *
 * - `perTopic`: counts per topic and status, the oldest `PENDING` row, the leases expired by the
 *   database clock.
 * - `history`: the rows of `<prefix>transition` (written when the store records transitions).
 * - `processedBy`: the inbox rows under the event-id identity (`Inbox.eventIdentity`).
 * - `recentFailures`: the newest `FAILURE` rows, without payloads.
 * - `countPurgeable`: the condition `PgOutboxStore`'s purge deletes by, counted.
 * - `relays`: the relays' heartbeats (rows `relay:<owner>` of the lease table).
 *
 * @since 0.1.0
 */
import { StoreError } from "@effect-outbox/core/Errors"
import { eventIdentity } from "@effect-outbox/core/Inbox"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { isEventId } from "@effect-outbox/core/OutboxMessage"
import { type HistoryEntry, ReadModel, type RecentFailure, type TopicCounts } from "@effect-outbox/core/ReadModel"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { fromSqlError, sqlState } from "./internal/errors.ts"
import { countPurgeable } from "./internal/purge.ts"
import { relayHeartbeats } from "./internal/recovery.ts"
import { millis } from "./internal/rows.ts"
import { PgTables, type Tables } from "./PgTables.ts"

// An operator pointing at the wrong schema sees "relation does not exist": say what to check.
const failed = (t: Tables, operation: string) => (error: SqlError) => {
  const mapped = fromSqlError(operation)(error)
  return sqlState(error) === "42P01"
    ? new StoreError({
        operation,
        kind: mapped.kind,
        cause: error,
        reason: `${mapped.reason} (are the outbox tables migrated in schema "${t.schema}"? check the schema and table prefix, OUTBOX_SCHEMA / OUTBOX_TABLE_PREFIX)`
      })
    : mapped
}

type TopicRow = { topic: string; status: OutboxStatus; n: number; oldest: Date | null; stale: number }

const byTopic = (rows: ReadonlyArray<TopicRow>): ReadonlyArray<TopicCounts> => {
  const topics = new Map<
    string,
    { byStatus: Partial<Record<OutboxStatus, number>>; oldest: number | null; stale: number }
  >()
  for (const row of rows) {
    const entry = topics.get(row.topic) ?? { byStatus: {}, oldest: null, stale: 0 }
    entry.byStatus[row.status] = row.n
    if (row.oldest !== null) entry.oldest = millis(row.oldest)
    entry.stale += row.stale
    topics.set(row.topic, entry)
  }
  return [...topics].map(([topic, entry]) => ({
    topic,
    byStatus: entry.byStatus,
    oldestPendingCreatedAt: entry.oldest,
    staleLeases: entry.stale
  }))
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const message = sql.literal(t.message)
  const run =
    (operation: string) =>
    <A>(effect: Effect.Effect<A, SqlError>) =>
      effect.pipe(Effect.mapError(failed(t, operation)), Effect.withSpan(`pg.readModel.${operation}`))

  return ReadModel.of({
    perTopic: sql<TopicRow>`SELECT topic, status, count(*)::int AS n,
          min(created_at) FILTER (WHERE status = 'PENDING') AS oldest,
          (count(*) FILTER (WHERE status = 'DISPATCHING' AND lease_expires_at < now()))::int AS stale
        FROM ${message} GROUP BY topic, status ORDER BY topic, status`.withoutTransform.pipe(
      Effect.map(byTopic),
      run("perTopic")
    ),

    history: (id) =>
      isEventId(id)
        ? sql<{ from_status: OutboxStatus; to_status: OutboxStatus; lease_owner: string | null; at: Date }>`
        SELECT from_status, to_status, lease_owner, at FROM ${sql.literal(t.transition)}
         WHERE event_id = ${id}::uuid ORDER BY id`.withoutTransform.pipe(
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
            run("history")
          )
        : Effect.succeed([]),

    processedBy: (id) =>
      sql<{ consumer: string; identity: string; processed_at: Date }>`
        SELECT consumer, identity, processed_at FROM ${sql.literal(t.processed)}
         WHERE identity = ${eventIdentity(id)} ORDER BY processed_at`.withoutTransform.pipe(
        Effect.map((rows) =>
          rows.map((row) => ({ consumer: row.consumer, identity: row.identity, processedAt: millis(row.processed_at) }))
        ),
        run("processedBy")
      ),

    recentFailures: (topic, limit) =>
      sql<{
        id: string
        topic: string
        key: string | null
        attempts: number
        last_error: string | null
        updated_at: Date
      }>`SELECT id::text AS id, topic, key, attempts, last_error, updated_at FROM ${message}
          WHERE status = 'FAILURE' AND (${topic ?? null}::text IS NULL OR topic = ${topic ?? null}::text)
          ORDER BY seq DESC LIMIT ${Math.max(0, Math.trunc(limit))}::int`.withoutTransform.pipe(
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
        run("recentFailures")
      ),

    countPurgeable: (statuses, olderThan) => countPurgeable(sql, t)(statuses, olderThan).pipe(run("countPurgeable")),

    relays: relayHeartbeats(sql, t).pipe(run("relays"))
  })
})

/**
 * The read model over the ambient `SqlClient`, in the tables of {@link PgTables}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<ReadModel, never, SqlClient.SqlClient | PgTables> = Layer.effect(ReadModel)(make)
