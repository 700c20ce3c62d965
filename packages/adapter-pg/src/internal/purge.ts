import * as PgTypes from "@effect/sql-pg/PgTypes"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { ts, typedArray } from "./params.ts"
import { notQueued, queuedStatuses, statusList } from "./statuses.ts"

const knownStatuses: ReadonlySet<string> = new Set(statusList)
const queuedSet: ReadonlySet<string> = new Set(queuedStatuses)

/**
 * The rows a purge may delete, as a `WHERE` condition over `m`: one of `wanted`, last updated
 * before `olderThan`. The condition leaves out the relay's statuses in the query text when none
 * of them is wanted, so the planner can prove the partial `status_idx` predicate (it cannot from
 * a parameter array).
 */
const purgeable = (sql: SqlClient.SqlClient, wanted: ReadonlyArray<OutboxStatus>, olderThan: number) => {
  const indexed = wanted.some((s) => queuedSet.has(s)) ? sql.literal("") : sql.literal(`AND ${notQueued("m.status")}`)
  return sql`m.status = ANY (${typedArray(wanted, PgTypes.OID.text)}) ${indexed} AND m.updated_at < ${ts(olderThan)}`
}

/**
 * Deletes at most `limit` rows in `statuses` last updated before `olderThan`, with their recorded
 * transitions, in one statement. One cleaner at a time (try-lock, never wait) and `SKIP LOCKED`:
 * a purge never queues behind a claim or a transition, and they never queue behind it.
 */
export const purge =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (request: {
    readonly statuses: ReadonlyArray<OutboxStatus>
    readonly olderThan: number
    readonly limit: number
  }): Effect.Effect<number, SqlError> => {
    const wanted = request.statuses.filter((s) => knownStatuses.has(s))
    if (request.limit <= 0 || wanted.length === 0) return Effect.succeed(0)
    const message = sql.literal(t.message)
    return sql<{ n: number }>`WITH gate AS (
          SELECT pg_try_advisory_xact_lock(${t.locks.purge}, 0) AS ok
        ), victims AS (
          SELECT m.id FROM ${message} m, gate
           WHERE gate.ok AND ${purgeable(sql, wanted, request.olderThan)}
           LIMIT ${Math.trunc(request.limit)}
             FOR UPDATE OF m SKIP LOCKED
        ), deleted AS (
          DELETE FROM ${message} m USING victims v WHERE m.id = v.id RETURNING m.id
        ), history AS (
          DELETE FROM ${sql.literal(t.transition)} h USING deleted d WHERE h.event_id = d.id
        )
        SELECT count(*)::int AS n FROM deleted`.withoutTransform.pipe(Effect.map(([row]) => row!.n))
  }

/** How many rows {@link purge} would delete with no `limit` (the dry run of a purge). */
export const countPurgeable =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (statuses: ReadonlyArray<OutboxStatus>, olderThan: number): Effect.Effect<number, SqlError> => {
    const wanted = statuses.filter((s) => knownStatuses.has(s))
    if (wanted.length === 0) return Effect.succeed(0)
    return sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(t.message)} m
      WHERE ${purgeable(sql, wanted, olderThan)}`.withoutTransform.pipe(Effect.map(([row]) => row?.n ?? 0))
  }
