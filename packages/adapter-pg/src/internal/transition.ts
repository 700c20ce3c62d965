import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { TransitionRequest } from "@effect-outbox/core/OutboxStore"
import type { Tables } from "../PgTables.ts"
import { behindItsHead, noteWaitingKeys } from "./waitingKey.ts"

/** Epoch millis (a float8 expression) to timestamptz; exact at millisecond precision. */
const fromMillis = (expression: string) => `to_timestamp((${expression})::float8 / 1000)`

/** What one transition request becomes on the wire: a record of `jsonb_to_recordset`. */
export const encodeRequest = (r: TransitionRequest, idx: number) => ({
  idx,
  id: r.id,
  from_statuses: r.from,
  to_status: r.to,
  accept_if_in: r.acceptIfIn ?? [],
  lease_owner: r.leaseOwner ?? null,
  attempts: r.patch.attempts ?? null,
  available_at_ms: r.patch.availableAt ?? null,
  set_last_error: r.patch.lastError !== undefined,
  last_error: r.patch.lastError ?? null,
  receipt_partition: r.patch.receipt?.partition ?? null,
  receipt_offset: r.patch.receipt?.offset ?? null,
  lease_action: r.patch.lease === undefined ? "keep" : r.patch.lease === null ? "clear" : "set",
  lease_set_owner: r.patch.lease?.owner ?? null,
  lease_set_expires_ms: r.patch.lease?.expiresAt ?? null,
  published_at_ms: r.patch.publishedAt ?? null,
  processed_at_ms: r.patch.processedAt ?? null,
  now_ms: r.now
})

/**
 * The generic batched compare-and-set: any mix of moves and patches. Parameter `$1` is the jsonb
 * array of {@link encodeRequest} records; rows come back as `(idx, outcome, current)`.
 */
export const genericStatement = (t: Tables, recordTransitions: boolean) => {
  const applied = `l.outcome = 'applied'`
  const history = recordTransitions
    ? `, history AS (
         INSERT INTO ${t.transition} (event_id, from_status, to_status, lease_owner, at)
         SELECT l.id, l.old_status, c.status, r.lease_owner, ${fromMillis("r.now_ms")}
           FROM changed c JOIN locked l ON l.idx = c.idx JOIN req r ON r.idx = c.idx
          WHERE l.outcome = 'applied'
       )`
    : ""
  return `
    WITH req AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(
        idx integer, id uuid, from_statuses text[], to_status text, accept_if_in text[], lease_owner text,
        attempts integer, available_at_ms float8, set_last_error boolean, last_error text,
        receipt_partition integer, receipt_offset text, lease_action text, lease_set_owner text,
        lease_set_expires_ms float8, published_at_ms float8, processed_at_ms float8, now_ms float8)
    ), locked AS (
      -- Lock first, in id order (no deadlock between two batches), then decide on the row as it
      -- is now: a locking read returns the latest committed version.
      SELECT r.idx, m.id, m.status AS old_status,
             CASE WHEN m.status = ANY (r.from_statuses)
                       AND (r.lease_owner IS NULL OR m.lease_owner IS NOT DISTINCT FROM r.lease_owner)
                    THEN 'applied'
                  WHEN m.status = ANY (r.accept_if_in) THEN 'already_advanced'
                  ELSE 'rejected' END AS outcome
        FROM req r JOIN ${t.message} m ON m.id = r.id
       ORDER BY m.id
         FOR UPDATE OF m
    ), changed AS (
      UPDATE ${t.message} m SET
        status = CASE WHEN ${applied} THEN r.to_status ELSE m.status END,
        attempts = CASE WHEN ${applied} AND r.attempts IS NOT NULL THEN r.attempts ELSE m.attempts END,
        available_at = CASE WHEN ${applied} AND r.available_at_ms IS NOT NULL
                            THEN ${fromMillis("r.available_at_ms")} ELSE m.available_at END,
        last_error = CASE WHEN ${applied} AND r.set_last_error THEN r.last_error ELSE m.last_error END,
        published_partition = COALESCE(r.receipt_partition, m.published_partition),
        published_offset = COALESCE(r.receipt_offset::bigint, m.published_offset),
        lease_owner = CASE WHEN NOT ${applied} THEN m.lease_owner
                           WHEN r.to_status <> 'DISPATCHING' OR r.lease_action = 'clear' THEN NULL
                           WHEN r.lease_action = 'set' THEN r.lease_set_owner
                           ELSE m.lease_owner END,
        lease_expires_at = CASE WHEN NOT ${applied} THEN m.lease_expires_at
                                WHEN r.to_status <> 'DISPATCHING' OR r.lease_action = 'clear' THEN NULL
                                WHEN r.lease_action = 'set' THEN ${fromMillis("r.lease_set_expires_ms")}
                                ELSE m.lease_expires_at END,
        published_at = CASE WHEN r.published_at_ms IS NOT NULL
                            THEN ${fromMillis("r.published_at_ms")} ELSE m.published_at END,
        processed_at = CASE WHEN ${applied} AND r.processed_at_ms IS NOT NULL
                            THEN ${fromMillis("r.processed_at_ms")} ELSE m.processed_at END,
        -- A late receipt on a row that moved on is bookkeeping, not a change of state.
        updated_at = CASE WHEN ${applied} THEN ${fromMillis("r.now_ms")} ELSE m.updated_at END
      FROM locked l JOIN req r ON r.idx = l.idx
      WHERE m.id = l.id
        AND (l.outcome = 'applied'
             OR (l.outcome = 'already_advanced' AND (r.receipt_partition IS NOT NULL OR r.published_at_ms IS NOT NULL)))
      RETURNING l.idx, m.status, m.key, m.seq
    ), waiting AS (
      -- A claimed row sent back to wait (a retry or an outage back-off) sets aside its key's
      -- younger due rows: they cannot go before it, and left available they fill the claim's
      -- scan. Set aside once, they stay so through the head's later rounds (claimV7.ts).
      SELECT c.key, min(c.seq) AS seq, max(${fromMillis("r.available_at_ms")}) AS head_due,
             max(${fromMillis("r.now_ms")}) AS now
        FROM changed c JOIN locked l ON l.idx = c.idx JOIN req r ON r.idx = c.idx
       WHERE ${applied} AND l.old_status = 'DISPATCHING' AND c.status = 'PENDING' AND c.key IS NOT NULL
         AND r.available_at_ms > r.now_ms
       GROUP BY c.key
    ), noted AS (
      ${noteWaitingKeys(t, "SELECT w.key, w.head_due FROM waiting w ORDER BY w.key")}
    ), pushed AS (
      UPDATE ${t.message} y SET available_at = ${behindItsHead}
        FROM waiting w
       WHERE y.key = w.key AND y.status = 'PENDING' AND y.seq > w.seq AND y.available_at <= w.now
         AND NOT EXISTS (SELECT 1 FROM req q WHERE q.id = y.id)
    )${history}
    SELECT r.idx, COALESCE(l.outcome, 'rejected') AS outcome, COALESCE(c.status, l.old_status) AS current
      FROM req r LEFT JOIN locked l ON l.idx = r.idx LEFT JOIN changed c ON c.idx = r.idx
     ORDER BY r.idx`
}

/**
 * A round every request of which is the same move with the same scalar patch: one `from` status,
 * one `to` (not `DISPATCHING`, so the lease is always cleared), one lease condition, one `now`,
 * one `publishedAt` and `lastError`; only the receipt differs per row. The relay's mark
 * (`DISPATCHING → PUBLISHED` with receipts) is the common case; so are a batch of failures with
 * one reason, and releases on shutdown.
 */
export interface Uniform {
  readonly from: OutboxStatus
  readonly to: OutboxStatus
  readonly leaseOwner: string | null
  readonly now: number
  readonly publishedAt: number | null
  readonly setLastError: boolean
  readonly lastError: string | null
}

const fastPatchKeys: ReadonlySet<string> = new Set(["receipt", "publishedAt", "lastError", "lease"])

/** The shared shape of a round, or `undefined` when it needs the generic statement. */
export const uniform = (requests: ReadonlyArray<TransitionRequest>): Uniform | undefined => {
  const first = requests[0]
  if (first === undefined || first.from.length !== 1 || first.to === "DISPATCHING") return undefined
  const shape: Uniform = {
    from: first.from[0]!,
    to: first.to,
    leaseOwner: first.leaseOwner ?? null,
    now: first.now,
    publishedAt: first.patch.publishedAt ?? null,
    setLastError: first.patch.lastError !== undefined,
    lastError: first.patch.lastError ?? null
  }
  for (const r of requests) {
    if (r.from.length !== 1 || r.from[0] !== shape.from || r.to !== shape.to) return undefined
    if ((r.leaseOwner ?? null) !== shape.leaseOwner || r.now !== shape.now) return undefined
    if ((r.patch.publishedAt ?? null) !== shape.publishedAt) return undefined
    if ((r.patch.lastError !== undefined) !== shape.setLastError || (r.patch.lastError ?? null) !== shape.lastError) {
      return undefined
    }
    const patch = r.patch as Readonly<Record<string, unknown>>
    for (const key in patch) {
      if (patch[key] !== undefined && !fastPatchKeys.has(key)) return undefined
    }
    // Setting a lease is only meaningful towards DISPATCHING, which is excluded above; a lease
    // patch here is `null` (clear), and leaving a status other than DISPATCHING clears it anyway.
    if (r.patch.lease !== undefined && r.patch.lease !== null) return undefined
  }
  return shape
}

/**
 * The fast path for a {@link uniform} round: a plain `UPDATE … WHERE status = from [AND
 * lease_owner = owner]` over typed arrays (ids, receipt partitions, receipt offsets), returning
 * the ids it moved. Exactly the rows the generic statement would report `applied`: the same
 * compare-and-set, decided by PostgreSQL's re-check of the `WHERE` on the latest row version;
 * the rest of the round (`already_advanced`, `rejected`, missing) goes to the generic statement.
 * The ids are sent sorted, and the plan walks them in that order (nested loop over the primary
 * key), so rows are locked in id order like the generic statement's.
 *
 * Parameters: `$1` uuid[] ids, `$2` int4[] partitions, `$3` text[] offsets, `$4` from, `$5` to,
 * `$6` lease owner or null, `$7` now (ms), `$8` publishedAt (ms) or null, `$9` set last_error,
 * `$10` last_error.
 */
export const fastStatement = (t: Tables, recordTransitions: boolean) => {
  const update = `UPDATE ${t.message} m SET
        status = $5::text,
        published_partition = COALESCE(r.receipt_partition, m.published_partition),
        published_offset = COALESCE(r.receipt_offset::bigint, m.published_offset),
        published_at = COALESCE(${fromMillis("$8::float8")}, m.published_at),
        last_error = CASE WHEN $9::boolean THEN $10::text ELSE m.last_error END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        updated_at = ${fromMillis("$7::float8")}
      FROM unnest($1::uuid[], $2::int4[], $3::text[]) AS r(id, receipt_partition, receipt_offset)
     WHERE m.id = r.id AND m.status = $4::text AND ($6::text IS NULL OR m.lease_owner = $6::text)
    RETURNING m.id`
  return recordTransitions
    ? `WITH changed AS (${update}), history AS (
         INSERT INTO ${t.transition} (event_id, from_status, to_status, lease_owner, at)
         SELECT c.id, $4::text, $5::text, $6::text, ${fromMillis("$7::float8")} FROM changed c
       )
       SELECT c.id FROM changed c`
    : update
}
