/**
 * The claim function since migration 17: migration 16's, with the rows of a waiting key set
 * aside once instead of moved behind their head on every round, and brought back by the claim
 * when the head has gone.
 */
import type { Tables } from "../PgTables.ts"
import { claimFinish, claimGuard, claimHeader } from "./claim.ts"
import { phase1Windows, windowsDeclarations } from "./claimV6.ts"
import { behindItsHead, bringBack, noteWaitingKeys, takeReturningKeys } from "./waitingKey.ts"

/**
 * The claim function since migration 17. Same signature, contract, windows and phase 2 as
 * migration 16's (`claimFunctionV6`). What changes is where a waiting key's younger rows go.
 *
 * Migration 16 moved them to just after the head's `available_at`, so every back-off round of
 * the head (a partition without a leader: one round per outage back-off) rewrote all of them
 * again, a non-HOT `UPDATE` per row per round, and the rounds cost more the longer the outage
 * lasted. Now they are set aside once, at `BEHIND_ITS_HEAD` (far out of the candidate scan), and
 * the key is recorded in the waiting-key table with the time its head is due:
 *
 * - a claim whose scan meets a waiting key (under the key's claim lock) sets aside its due
 *   younger rows within the range the scan read; the transition that sends a claimed row back
 *   to wait sets aside all of its key's due younger rows;
 * - every claim first brings back the keys whose head is due and has gone (nothing `DISPATCHING`
 *   and the first `PENDING` row one set aside), at their `created_at`, in a statement after the
 *   one that took the keys out of the table: it sees the rows set aside by any transaction that
 *   held the key's table row meanwhile;
 * - a scan that meets a key whose first `PENDING` row is set aside (its head went while the key's
 *   head time was still ahead) records the key as due now, so the next claim brings it back.
 *
 * Rows not yet due when their key waits keep their time; they are set aside when they come due
 * and the scan meets them.
 */
export const claimFunctionV7 = (t: Tables) =>
  `${claimHeader(t)}${windowsDeclarations}     returning_keys text[];
   BEGIN
${claimGuard}     -- The keys whose head has gone get their rows back, before the scan reads.
     WITH ${takeReturningKeys(t, "p_now")}
     SELECT array_agg(gone.key) INTO returning_keys FROM gone;
     IF returning_keys IS NOT NULL THEN
       ${bringBack(t, "returning_keys", "p_now")};
     END IF;
${phase1Windows(t)}     -- The waiting keys met, less those in flight now: the scan's snapshot may predate a claim
     -- of their head, whose relay may be sending it back this moment (its transition sets the
     -- key's rows aside itself). Then recorded first, in key order as the transition does
     -- (see noteWaitingKeys), and their due younger rows set aside. A key whose first PENDING
     -- row is already set aside has lost its head: due now.
     IF cardinality(waiting_keys) > 0 THEN
       SELECT COALESCE(array_agg(u.key), '{}'), COALESCE(array_agg(u.wait_until), '{}'),
              COALESCE(array_agg(u.head_seq), '{}')
         INTO waiting_keys, waiting_until, waiting_seq
         FROM unnest(waiting_keys, waiting_until, waiting_seq) AS u(key, wait_until, head_seq)
        WHERE NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = u.key AND d.status = 'DISPATCHING');
     END IF;
     IF cardinality(waiting_keys) > 0 THEN
       ${noteWaitingKeys(
         t,
         `SELECT u.key, CASE WHEN u.wait_until = ${behindItsHead} THEN p_now ELSE u.wait_until END
            FROM unnest(waiting_keys, waiting_until) AS u(key, wait_until)
           ORDER BY u.key`
       )};
       -- Only within the rows the windows covered (the first read_rows in availability order):
       -- the scan's own range, not every due row or every row of the key; the rest are met
       -- by later claims as they come to the front.
       WITH scanned AS (
         SELECT m.id, m.key, m.seq FROM ${t.message} m
          WHERE m.status = 'PENDING' AND m.available_at <= p_now
          ORDER BY m.available_at, m.seq
          LIMIT read_rows
       )
       UPDATE ${t.message} y SET available_at = ${behindItsHead}
         FROM scanned s JOIN unnest(waiting_keys, waiting_seq) AS u(key, head_seq)
              ON s.key = u.key AND s.seq > u.head_seq
        WHERE y.id = s.id AND y.status = 'PENDING' AND y.available_at <= p_now;
     END IF;
${claimFinish(t)}`
