/**
 * The claim function since migration 16: migration 15's (`claimV5.ts`) with the per-key probes
 * and key locks run only for the candidates the batch takes, one statement per scan step.
 */
import type { Tables } from "../PgTables.ts"
import { firstFailure, keyHead, keyPrefixUpTo } from "./claim.ts"

/**
 * The candidate scan of {@link claimFunctionV6}: the candidates of migration 15's scan, in the
 * same order, with the head, in-flight and `FAILURE` probes run per candidate as the caller reads
 * them. The scanned rows are ordered by position first, behind an `OFFSET 0` fence that keeps the
 * probes out of the sorted subquery: a claim step that stops after `limit` slots probes about
 * `limit` keys, where migration 15's final `ORDER BY pos` probed every key of the scan (twice the
 * batch in its first step) before the first candidate came out.
 */
export const candidateHeadsV6 = (t: Tables, now: string, readLimit: string, failedBlocks: string, afterPos: string) =>
  `SELECT c.id, c.key, c.pos FROM (
      SELECT o.id, o.key, o.pos FROM (
          SELECT DISTINCT ON (r.key IS NULL, COALESCE(r.key, r.id::text)) r.id, r.key, r.pos
            FROM (SELECT m.id, m.key, row_number() OVER (ORDER BY m.available_at, m.seq) AS pos
                    FROM ${t.message} m
                   WHERE m.status = 'PENDING' AND m.available_at <= ${now}
                   ORDER BY m.available_at, m.seq
                   LIMIT ${readLimit}) r
           ORDER BY r.key IS NULL, COALESCE(r.key, r.id::text), r.pos
        ) o
       WHERE o.pos > ${afterPos}
       ORDER BY o.pos
      OFFSET 0
    ) c
    WHERE c.key IS NULL OR (
      NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = c.key AND d.status = 'DISPATCHING')
      AND EXISTS (
        SELECT 1 FROM (SELECT e.seq, e.available_at FROM ${t.message} e
                        WHERE e.key = c.key AND e.status = 'PENDING' ORDER BY e.seq LIMIT 1) h
         WHERE h.available_at <= ${now}
           AND NOT (${failedBlocks} AND COALESCE(${firstFailure(t, "c.key")} < h.seq, false))))
    ORDER BY c.pos`

/**
 * One step of phase 1 as a single statement (into `step_keys` and `step_ids`): the candidates of
 * {@link candidateHeadsV6} in order, each key not locked yet try-locked (`pg_try_advisory_xact_lock`,
 * never waited on) and each key-less row not taken yet kept, until `p_limit - slots` are held.
 * The lock is taken above an `OFFSET 0` fence so it comes after the key's probes: a key whose head
 * waits, or that is in flight, is never locked. The `LIMIT` stops reading (and locking) at the
 * last slot. A key whose lock another claim holds may come up again in a later step and is tried
 * again there.
 */
const lockCandidatesV6 = (t: Tables, readLimit: string, afterPos: string) =>
  `SELECT COALESCE(array_agg(l.key) FILTER (WHERE l.key IS NOT NULL), '{}'),
              COALESCE(array_agg(l.id) FILTER (WHERE l.key IS NULL), '{}')
         INTO step_keys, step_ids
         FROM (SELECT c.id, c.key
                 FROM (${candidateHeadsV6(t, "p_now", readLimit, "p_failed_head_blocks", afterPos)} OFFSET 0) c
                WHERE CASE WHEN c.key IS NULL THEN NOT (c.id = ANY (unkeyed))
                           ELSE NOT (c.key = ANY (locked_keys))
                                AND pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(c.key)) END
                LIMIT p_limit - slots) l;`

/**
 * The claim function since migration 16. Same signature, contract, widening steps and phase 2 as
 * migration 15's (`claimFunctionV5`). Phase 1 is one statement per step ({@link lockCandidatesV6})
 * where migration 15 ran a PL/pgSQL loop over the candidates, and its probes run for the
 * candidates it reaches, not for every key of the step.
 */
export const claimFunctionV6 = (t: Tables) =>
  `CREATE OR REPLACE FUNCTION ${t.claimFunction}(
     p_owner text, p_limit integer, p_max_per_key integer, p_now timestamptz, p_lease_millis bigint,
     p_failed_head_blocks boolean)
   RETURNS SETOF ${t.message}
   LANGUAGE plpgsql VOLATILE AS $claim$
   DECLARE
     locked_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     step_keys text[];
     step_ids uuid[];
     slots integer := 0;
     n integer := LEAST(p_limit, 100000);
     bound integer;
     read_to integer := 0;
   BEGIN
     IF p_limit <= 0 OR p_max_per_key <= 0 THEN
       RETURN;
     END IF;
     -- The second snapshot is what makes the key lock meaningful; REPEATABLE READ would reuse
     -- the first one and could hand a key's later rows to a second relay.
     IF current_setting('transaction_isolation') <> 'read committed' THEN
       RAISE EXCEPTION 'outbox claim needs READ COMMITTED, the transaction is %',
         current_setting('transaction_isolation') USING ERRCODE = '25000';
     END IF;
     -- Phase 1: discover and lock, one statement per step, reading further only while slots are left.
     FOREACH bound IN ARRAY ARRAY[n * 2 + 10, n * 6 + 100, n * 20 + 1000] LOOP
       ${lockCandidatesV6(t, "bound", "read_to")}
       locked_keys := locked_keys || step_keys;
       unkeyed := unkeyed || step_ids;
       slots := slots + cardinality(step_keys) + cardinality(step_ids);
       EXIT WHEN slots >= p_limit;
       read_to := bound;
     END LOOP;
     IF slots = 0 THEN
       RETURN;
     END IF;
     -- Phase 2: decide under the locks, in one statement (a snapshot taken after they were granted).
     RETURN QUERY
     WITH heads AS (
       SELECT k.key, h.seq,
              CASE WHEN p_failed_head_blocks THEN ${firstFailure(t, "k.key")} END AS failed_seq
         FROM (SELECT DISTINCT u.key FROM unnest(locked_keys) AS u(key)) AS k
         CROSS JOIN LATERAL (${keyHead(t, "k.key")}) h
        WHERE h.available_at <= p_now
          AND NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = k.key AND d.status = 'DISPATCHING')
     ), open_heads AS (
       SELECT * FROM heads WHERE heads.failed_seq IS NULL OR heads.failed_seq > heads.seq
     ), loose AS (
       SELECT m.id, m.seq FROM ${t.message} m
        WHERE m.id = ANY (unkeyed) AND m.status = 'PENDING' AND m.available_at <= p_now
        FOR UPDATE SKIP LOCKED
     ), cut AS (
       SELECT COALESCE(
                (SELECT s.seq FROM (SELECT open_heads.seq FROM open_heads UNION ALL SELECT loose.seq FROM loose) s
                  ORDER BY s.seq OFFSET p_limit - 1 LIMIT 1),
                9223372036854775807) AS seq
     ), keyed AS (
       SELECT p.id, p.seq
         FROM open_heads k CROSS JOIN cut
         CROSS JOIN LATERAL (${keyPrefixUpTo(t, "k.key", "p_now", "p_max_per_key", "LEAST(cut.seq, COALESCE(k.failed_seq - 1, 9223372036854775807))")}) p
     ), chosen AS (
       SELECT c.id FROM (SELECT * FROM keyed UNION ALL SELECT * FROM loose) c ORDER BY c.seq LIMIT p_limit
     )
     UPDATE ${t.message} m
        SET status = 'DISPATCHING', lease_owner = p_owner,
            lease_expires_at = now() + p_lease_millis * interval '1 millisecond', updated_at = p_now
       FROM chosen
      WHERE m.id = chosen.id AND m.status = 'PENDING'
     RETURNING m.*;
   END
   $claim$`
