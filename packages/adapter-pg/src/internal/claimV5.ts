/**
 * Migration 15's claim function (frozen; migration 16's is `claimV6.ts`): the contract and phase 2
 * of migration 4's function (`claimFunctionV4` in `claim.ts`), with a candidate scan that reads
 * only as far as it needs.
 */
import type { Tables } from "../PgTables.ts"
import { claimFinish, claimGuard, claimHeader, firstFailure } from "./claim.ts"

/**
 * The candidate scan of migration 4 (one candidate per key at its first row in availability
 * order, every key-less row; a key only when nothing of it is `DISPATCHING` and its head is
 * available and not behind a blocking `FAILURE` row), limited to the scanned rows after position
 * `afterPos`, and returning each candidate's position.
 *
 * Its cost is the scan and, for every distinct key in it, the head and `DISPATCHING` probes: the
 * final `ORDER BY pos` needs all of them before the first candidate comes out. So a scan sized for
 * the worst case (a few keys holding most rows) pays for hundreds of keys the batch never takes.
 */
export const candidateHeadsV5 = (t: Tables, now: string, readLimit: string, failedBlocks: string, afterPos: string) =>
  `SELECT c.id, c.key, c.pos FROM (
      SELECT DISTINCT ON (r.key IS NULL, COALESCE(r.key, r.id::text)) r.id, r.key, r.pos
        FROM (SELECT m.id, m.key, row_number() OVER (ORDER BY m.available_at, m.seq) AS pos
                FROM ${t.message} m
               WHERE m.status = 'PENDING' AND m.available_at <= ${now}
               ORDER BY m.available_at, m.seq
               LIMIT ${readLimit}) r
       ORDER BY r.key IS NULL, COALESCE(r.key, r.id::text), r.pos
    ) c
    WHERE c.pos > ${afterPos} AND (c.key IS NULL OR (
      NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = c.key AND d.status = 'DISPATCHING')
      AND EXISTS (
        SELECT 1 FROM (SELECT e.seq, e.available_at FROM ${t.message} e
                        WHERE e.key = c.key AND e.status = 'PENDING' ORDER BY e.seq LIMIT 1) h
         WHERE h.available_at <= ${now}
           AND NOT (${failedBlocks} AND COALESCE(${firstFailure(t, "c.key")} < h.seq, false)))))
    ORDER BY c.pos`

/**
 * The claim function of migration 15. Same signature, contract and phase 2 as migration 4's;
 * phase 1 scans in widening steps, each only when the steps before it left slots free:
 *
 * - the `limit * 2 + 10` oldest available rows: with keys spread over the backlog (the common
 *   case) they hold enough candidates for the batch, and only their keys are probed;
 * - up to `limit * 6 + 100` rows: other claims running at once (other relays, this relay's
 *   batches in flight) hold the first keys;
 * - up to `limit * 20 + 1000`, migration 4's bound: a few keys hold most of the backlog.
 *
 * Each step reads on from the position where the one before ended, and skips a key an earlier
 * step tried: other claims may have moved rows in between, so positions can shift. Phase 2 is
 * unchanged: it decides under the key locks in a fresh snapshot, so a candidate the scan got
 * wrong can cost a slot, never order.
 */
export const claimFunctionV5 = (t: Tables) =>
  `${claimHeader(t)}     candidate record;
     locked_keys text[] := '{}';
     tried_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     slots integer := 0;
     n integer := LEAST(p_limit, 100000);
     bound integer;
     read_to integer := 0;
   BEGIN
${claimGuard}     -- Phase 1: discover and lock, reading further only while slots are left.
     FOREACH bound IN ARRAY ARRAY[n * 2 + 10, n * 6 + 100, n * 20 + 1000] LOOP
       FOR candidate IN ${candidateHeadsV5(t, "p_now", "bound", "p_failed_head_blocks", "read_to")} LOOP
         IF candidate.key IS NULL THEN
           IF NOT (candidate.id = ANY (unkeyed)) THEN
             unkeyed := unkeyed || candidate.id;
             slots := slots + 1;
           END IF;
         ELSIF NOT (candidate.key = ANY (tried_keys)) THEN
           tried_keys := tried_keys || candidate.key;
           IF pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(candidate.key)) THEN
             locked_keys := locked_keys || candidate.key;
             slots := slots + 1;
           END IF;
         END IF;
         EXIT WHEN slots >= p_limit;
       END LOOP;
       EXIT WHEN slots >= p_limit;
       read_to := bound;
     END LOOP;
${claimFinish(t)}`
