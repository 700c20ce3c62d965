import * as PgTypes from "@effect/sql-pg/PgTypes"
import { isEventId, type OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { ListFilter, OutboxStats } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { ts, typedArray } from "./params.ts"
import { type MessageRow, millis, toMessage } from "./rows.ts"
import { countByStatus, statusList } from "./statuses.ts"

const knownStatuses: ReadonlySet<string> = new Set(statusList)

/** One row by id; a value that is no event id matches nothing. */
export const get =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (id: string): Effect.Effect<Option.Option<OutboxMessage>, SqlError> =>
    isEventId(id)
      ? sql<MessageRow>`SELECT * FROM ${sql.literal(t.message)} WHERE id = ${id}::uuid`.withoutTransform.pipe(
          Effect.map((rows) => (rows.length === 0 ? Option.none() : Option.some(toMessage(rows[0]!))))
        )
      : Effect.succeed(Option.none())

/** Rows matching every given filter, in `seq` order. */
export const list =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (filter: ListFilter): Effect.Effect<ReadonlyArray<OutboxMessage>, SqlError> => {
    const statuses = filter.statuses?.filter((s) => knownStatuses.has(s))
    const ids = filter.ids?.filter(isEventId)
    const clauses = [
      statuses === undefined ? undefined : sql`status = ANY (${typedArray(statuses, PgTypes.OID.text)})`,
      filter.topic === undefined ? undefined : sql`topic = ${filter.topic}`,
      ids === undefined ? undefined : sql`id = ANY (${typedArray(ids, PgTypes.OID.uuid)})`,
      filter.createdBefore === undefined ? undefined : sql`created_at < ${ts(filter.createdBefore)}`,
      filter.updatedBefore === undefined ? undefined : sql`updated_at < ${ts(filter.updatedBefore)}`,
      filter.afterSeq === undefined ? undefined : sql`seq > ${Math.trunc(filter.afterSeq)}`
    ].filter((c) => c !== undefined)
    return sql<MessageRow>`SELECT * FROM ${sql.literal(t.message)} WHERE ${sql.and(clauses)}
      ORDER BY seq LIMIT ${Math.max(0, Math.trunc(filter.limit))}`.withoutTransform.pipe(
      Effect.map((rows) => rows.map(toMessage))
    )
  }

/** Counts per status, the oldest pending row, expired leases and blocked keys. */
export const stats =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (now: number): Effect.Effect<OutboxStats, SqlError> => {
    const message = sql.literal(t.message)
    return sql<{
      by_status: Record<string, number> | string
      oldest: Date | null
      stale: number
      blocked: number
    }>`SELECT
        (SELECT COALESCE(jsonb_object_agg(s.status, s.n), '{}'::jsonb)
           FROM (${sql.literal(countByStatus(t))}) s) AS by_status,
        (SELECT min(created_at) FROM ${message} WHERE status = 'PENDING') AS oldest,
        (SELECT count(*)::int FROM ${message}
          WHERE status = 'DISPATCHING' AND lease_expires_at < ${ts(now)}) AS stale,
        (SELECT count(DISTINCT key)::int FROM ${message}
          WHERE status = 'FAILURE' AND key IS NOT NULL) AS blocked`.withoutTransform.pipe(
      Effect.map(
        ([row]): OutboxStats => ({
          byStatus: (typeof row!.by_status === "string"
            ? JSON.parse(row!.by_status)
            : row!.by_status) as OutboxStats["byStatus"],
          oldestPendingCreatedAt: row!.oldest === null ? null : millis(row!.oldest),
          staleLeases: row!.stale,
          blockedKeys: row!.blocked
        })
      )
    )
  }
