import { BEHIND_ITS_HEAD } from "@effect-outbox/core/OutboxMessage"
import type { Tables } from "../PgTables.ts"
import { keyHead } from "./claim.ts"

/**
 * Where a waiting key's younger rows went in migration 16: a little after its head's
 * `available_at` (by the head's wait, at most a second), never before it. Each back-off round
 * of the head moved them again; migration 17 sets them aside once, at {@link behindItsHead}.
 */
export const behindHead = (headAvailableAt: string, now: string) =>
  `(${headAvailableAt} + LEAST(interval '1 second', ${headAvailableAt} - ${now}))`

/** `BEHIND_ITS_HEAD` as a timestamptz: the `available_at` of a row set aside behind its head. */
export const behindItsHead = `'${new Date(BEHIND_ITS_HEAD).toISOString()}'::timestamptz`

/**
 * The table of keys set aside (migration 17): one row per key whose younger rows wait at
 * {@link behindItsHead}, with the time its head is due. A claim looks only at keys whose head is
 * due: before that the head cannot have been published.
 */
export const waitingKeyMigration = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.waitingKey} (
         key text PRIMARY KEY,
         head_due timestamptz NOT NULL
       )`,
  // Tiny and rewritten on every back-off round of a waiting head.
  `ALTER TABLE ${t.waitingKey} SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)`
]

/**
 * Records keys as set aside, from `source` (a query with columns `key` and `head_due`). Always
 * an upsert that locks an existing row (`DO UPDATE` locks it even when its `WHERE` leaves it
 * unwritten): a claim bringing the key's rows back at the same moment waits for this
 * transaction, then brings back what it set aside too (its next statement sees it), so no row is
 * ever set aside without its key in the table. Sources give their keys in key order, so two
 * upserts lock the rows they share in the same order.
 */
export const noteWaitingKeys = (t: Tables, source: string) =>
  `INSERT INTO ${t.waitingKey} AS w (key, head_due) ${source}
   ON CONFLICT (key) DO UPDATE SET head_due = EXCLUDED.head_due
   WHERE w.head_due IS DISTINCT FROM EXCLUDED.head_due`

/**
 * The keys to bring back, deleted from the table: their head is due, nothing of them is
 * `DISPATCHING`, and their first `PENDING` row is one set aside (the head has gone), or they have
 * no `PENDING` row left: two CTEs, `taken` and `gone` (the deleted keys, column `key`).
 *
 * A claim takes such a key only with its claim lock (tried, as the scan does, and only once the
 * key qualifies) and its table row (`SKIP LOCKED`): a key another claim is bringing back or
 * scanning is left to that claim, so two claims never wait on each other here, and a key being
 * brought back is never set aside again by a scan in the meantime.
 */
export const takeReturningKeys = (t: Tables, now: string) =>
  `taken AS MATERIALIZED (
     SELECT w.key FROM ${t.waitingKey} w
      WHERE CASE WHEN w.head_due <= ${now}
                      AND NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = w.key AND d.status = 'DISPATCHING')
                      AND COALESCE((SELECT h.available_at FROM (${keyHead(t, "w.key")}) h) = ${behindItsHead}, true)
                 THEN pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(w.key))
                 ELSE false END
      FOR UPDATE SKIP LOCKED
   ), gone AS (
     DELETE FROM ${t.waitingKey} w USING taken WHERE w.key = taken.key RETURNING w.key
   )`

/**
 * Brings the set-aside rows of `keys` (a text[] expression) back, at their `created_at` (they
 * were due when set aside, and go by their age again among the available rows).
 */
export const bringBack = (t: Tables, keys: string, now: string) =>
  `UPDATE ${t.message} y SET available_at = LEAST(y.created_at, ${now})
    WHERE y.key = ANY (${keys}) AND y.status = 'PENDING' AND y.available_at = ${behindItsHead}`
