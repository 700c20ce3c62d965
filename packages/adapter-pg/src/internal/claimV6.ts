/**
 * The claim function since migration 16: migration 15's contract and phase 2, with a candidate
 * scan whose per-key probes run only for the candidates it reaches, and that reads on past the
 * rows of keys whose head waits, moving those rows behind their head.
 */
import type { Tables } from "../PgTables.ts"
import { claimFinish, claimGuard, claimHeader, firstFailure } from "./claim.ts"
import { behindHead } from "./waitingKey.ts"

/**
 * One window of the candidate scan: the next `size` available `PENDING` rows in availability
 * order after `(afterAt, afterSeq)` (a row comparison on the `(available_at, seq)` index, so a
 * window starts where the one before ended), one row per key (at its first row in the window) and
 * every key-less row, in window order.
 *
 * The rows are ordered by position first, behind an `OFFSET 0` fence that keeps the per-key
 * probes out of the sort: the probes run row by row as the caller reads, so a claim that stops
 * after `limit` slots probes about `limit` keys, not every key of the window.
 *
 * A key's row is a candidate (`wait_until` null) by migration 4's rules: nothing of the key is
 * `DISPATCHING`, its head is available and not behind a blocking `FAILURE` row. A key with
 * nothing `DISPATCHING` whose head is not yet available comes back *waiting*: `wait_until` is
 * its head's `available_at`, `head_seq` its head's `seq`.
 */
export const candidateWindow = (
  t: Tables,
  now: string,
  size: string,
  failedBlocks: string,
  afterAt: string,
  afterSeq: string
) =>
  `SELECT c.id, c.key, c.pos,
          CASE WHEN h.available_at > ${now} THEN h.available_at END AS wait_until, h.seq AS head_seq
     FROM (
       SELECT o.id, o.key, o.pos FROM (
           SELECT DISTINCT ON (r.key IS NULL, COALESCE(r.key, r.id::text)) r.id, r.key, r.pos
             FROM (SELECT m.id, m.key, row_number() OVER (ORDER BY m.available_at, m.seq) AS pos
                     FROM ${t.message} m
                    WHERE m.status = 'PENDING' AND m.available_at <= ${now}
                      AND (m.available_at, m.seq) > (${afterAt}, ${afterSeq})
                    ORDER BY m.available_at, m.seq
                    LIMIT ${size}) r
            ORDER BY r.key IS NULL, COALESCE(r.key, r.id::text), r.pos
         ) o
        ORDER BY o.pos
       OFFSET 0
     ) c
     LEFT JOIN LATERAL (SELECT e.seq, e.available_at FROM ${t.message} e
                         WHERE e.key = c.key AND e.status = 'PENDING' ORDER BY e.seq LIMIT 1) h ON c.key IS NOT NULL
    WHERE c.key IS NULL OR (
      NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = c.key AND d.status = 'DISPATCHING')
      AND (h.available_at > ${now}
           OR NOT (${failedBlocks} AND COALESCE(${firstFailure(t, "c.key")} < h.seq, false))))
    ORDER BY c.pos`

/**
 * Where the window of `size` rows after `(afterAt, afterSeq)` ends: its last row's
 * `(available_at, seq)`, none when fewer rows are left. Read only when the claim goes on to the
 * next window.
 */
const windowEnd = (t: Tables, size: string) =>
  `SELECT m.available_at, m.seq INTO after_at, after_seq
     FROM ${t.message} m
    WHERE m.status = 'PENDING' AND m.available_at <= p_now
      AND (m.available_at, m.seq) > (after_at, after_seq)
    ORDER BY m.available_at, m.seq
   OFFSET ${size} - 1 LIMIT 1;`

/** The claim's variables since migration 16: the scan's windows and the waiting keys it met. */
export const windowsDeclarations = `     candidate record;
     locked_keys text[] := '{}';
     tried_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     slots integer := 0;
     n integer := LEAST(p_limit, 100000);
     size integer;
     budget integer;
     read_rows integer := 0;
     after_at timestamptz := '-infinity';
     after_seq bigint := 0;
     step integer := 0;
     waiting_keys text[] := '{}';
     waiting_until timestamptz[] := '{}';
     waiting_seq bigint[] := '{}';
`

/**
 * Phase 1 since migration 16: windows in availability order, each read only when the ones before
 * it left slots free (see {@link claimFunctionV6}); collects the locked keys, the key-less rows
 * and the waiting keys met, and counts the rows the windows covered in `read_rows`.
 */
export const phase1Windows = (t: Tables) => `     budget := n * 200 + 10000;
     -- Phase 1: discover and lock, reading further only while slots are left.
     LOOP
       step := step + 1;
       size := CASE step WHEN 1 THEN n * 2 + 10 WHEN 2 THEN n * 4 + 90 WHEN 3 THEN n * 14 + 900
                         ELSE n * 20 + 1000 END;
       FOR candidate IN ${candidateWindow(t, "p_now", "size", "p_failed_head_blocks", "after_at", "after_seq")} LOOP
         IF candidate.wait_until IS NOT NULL THEN
           IF NOT (candidate.key = ANY (tried_keys)) THEN
             tried_keys := tried_keys || candidate.key;
             IF pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(candidate.key)) THEN
               waiting_keys := waiting_keys || candidate.key;
               waiting_until := waiting_until || candidate.wait_until;
               waiting_seq := waiting_seq || candidate.head_seq;
             END IF;
           END IF;
         ELSIF candidate.key IS NULL THEN
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
       read_rows := read_rows + size;
       EXIT WHEN slots >= p_limit OR read_rows >= budget;
       -- On to the next window, from where this one ended; none when it was the last.
       ${windowEnd(t, "size")}
       EXIT WHEN NOT FOUND;
     END LOOP;
`

/**
 * The claim function since migration 16. Same signature, contract and phase 2 as migration 15's
 * (`claimFunctionV5`); phase 1 reads windows in availability order, each only when the ones
 * before it left slots free:
 *
 * - the `limit * 2 + 10` oldest available rows, then `limit * 4 + 90` more, then
 *   `limit * 14 + 900` more (migration 15's three steps, whose ends were at 2n+10, 6n+100 and
 *   20n+1000 rows);
 * - then windows of `limit * 20 + 1000` rows, up to `limit * 200 + 10000` rows read in all.
 *
 * The per-key probes run only for the candidates a window reaches ({@link candidateWindow}), and
 * a key is try-locked after its probes: a key whose head waits, or that is in flight, is never
 * locked as a candidate.
 *
 * The last item and the waiting keys are what is new beside that. Rows of a key whose head waits
 * (backing off after a failed or refused publish) stay available while the head is not, and
 * fail the head check. A partition without a leader keeps its keys' heads waiting while new rows
 * of those keys keep arriving, so the oldest available rows end up being theirs: migration 15
 * stopped reading at 20n+1000 rows and claimed nothing for the partitions that were still
 * served. Now the scan reads on, and a waiting key it meets has its younger rows moved to just
 * after its head's `available_at` (`behindHead`; never earlier), under the key's claim lock (a
 * key another claim holds is left alone): they could not be claimed before the head anyway, and
 * the next claims no longer read them. The transition that sends a claimed row back to wait does
 * the same for the rows there were then; this catches those that arrived since.
 *
 * A key tried once is not tried again in a later window. Phase 2 is unchanged: it decides under
 * the key locks in a fresh snapshot, so a candidate the scan got wrong can cost a slot, never
 * order.
 */
export const claimFunctionV6 = (t: Tables) =>
  `${claimHeader(t)}${windowsDeclarations}   BEGIN
${claimGuard}${phase1Windows(t)}     -- The waiting keys met: their younger rows wait behind their head.
     IF cardinality(waiting_keys) > 0 THEN
       UPDATE ${t.message} y SET available_at = w.behind
         FROM (SELECT u.key, u.head_seq, ${behindHead("u.wait_until", "p_now")} AS behind
                 FROM unnest(waiting_keys, waiting_until, waiting_seq) AS u(key, wait_until, head_seq)) w
        WHERE y.key = w.key AND y.status = 'PENDING' AND y.seq > w.head_seq AND y.available_at < w.behind;
     END IF;
${claimFinish(t)}`
