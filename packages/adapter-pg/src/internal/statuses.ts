/**
 * The outbox statuses as SQL: the lists the migrations' CHECK constraints and partial indexes
 * are built from, and the per-status count the gauges sample.
 */
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import type { Tables } from "../PgTables.ts"

/**
 * Every status, for the CHECK constraint of migration 4. A status added to `Lifecycle` needs a
 * migration of its own that replaces the constraint on tables migrated earlier.
 */
export const statusList: ReadonlyArray<OutboxStatus> = Lifecycle.statuses

/**
 * Migration 1's CHECK: every status but `SKIPPED`, which migration 4 added (and whose constraint
 * replaces this one, so a status added later only ever widens it in between).
 */
export const statusListV1: ReadonlyArray<OutboxStatus> = statusList.filter((s) => s !== "SKIPPED")

/**
 * The relay's working statuses (`Lifecycle.isQueued`). Since migration 3 the `(status,
 * updated_at)` index leaves them out (`WHERE status NOT IN (…)`): inserts and claims write no
 * entry there, while retention, the stats and operator listings, which read the other statuses,
 * still find every row they need. Queries that want that index spell the condition out, so the
 * planner can prove its predicate.
 */
export const queuedStatuses: ReadonlyArray<OutboxStatus> = statusList.filter(Lifecycle.isQueued)

/** A SQL list of statuses: `'PENDING', 'DISPATCHING'`. */
export const sqlStatuses = (statuses: ReadonlyArray<OutboxStatus>) => statuses.map((s) => `'${s}'`).join(", ")

/** `status NOT IN ('PENDING', 'DISPATCHING')`: the predicate of `message_status_idx`. */
export const notQueued = (column: string) => `${column} NOT IN (${sqlStatuses(queuedStatuses)})`

/**
 * Rows per status as `(status, n)`, statuses without rows left out. In three parts, each of which
 * a partial index can serve (`status_idx`, `pending_idx`, `dispatching_idx`): `stats` is sampled
 * into gauges on a schedule.
 */
export const countByStatus = (t: Tables) =>
  `SELECT status, count(*)::int AS n FROM ${t.message} WHERE ${notQueued("status")} GROUP BY status
   UNION ALL
   SELECT 'PENDING', count(*)::int FROM ${t.message} WHERE status = 'PENDING' HAVING count(*) > 0
   UNION ALL
   SELECT 'DISPATCHING', count(*)::int FROM ${t.message} WHERE status = 'DISPATCHING' HAVING count(*) > 0`
