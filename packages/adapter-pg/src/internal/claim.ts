/**
 * The live claim: the candidate scans, the per-key head and prefix reads, and the claim functions
 * of migrations 3 and 4 that are built from them (migration 2's frozen function is `claimV2.ts`).
 */
import type { Tables } from "../PgTables.ts"

/**
 * The claim's candidate scan since migration 3: the first `readLimit` available `PENDING` rows in
 * availability order, one candidate per key (at the key's first row in that order) plus every
 * key-less row. A key is a candidate only when nothing of it is `DISPATCHING` and its *head* (its
 * first `PENDING` row by `seq`, wherever that sits in the scan) is available: a key blocked by a
 * row backing off is never locked. The loop needs no list of keys seen (which made it quadratic
 * in the batch size), and each key costs one head probe however many of its rows the scan read.
 *
 * The head is looked up, not required to be in the scan: a retried head is available later than
 * the key's younger rows, so after a broker outage every key's head can sit behind thousands of
 * its own later rows. Requiring the scanned row to be the head starved such keys for good (found
 * by the broker-outage fault test: 5,700 rows PENDING, every claim empty).
 */
export const candidateHeads = (t: Tables, now: string, readLimit: string) =>
  `SELECT c.id, c.key FROM (
      SELECT DISTINCT ON (r.key IS NULL, COALESCE(r.key, r.id::text)) r.id, r.key, r.pos
        FROM (SELECT m.id, m.key, row_number() OVER (ORDER BY m.available_at, m.seq) AS pos
                FROM ${t.message} m
               WHERE m.status = 'PENDING' AND m.available_at <= ${now}
               ORDER BY m.available_at, m.seq
               LIMIT ${readLimit}) r
       ORDER BY r.key IS NULL, COALESCE(r.key, r.id::text), r.pos
    ) c
    WHERE c.key IS NULL OR (
      NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = c.key AND d.status = 'DISPATCHING')
      -- the key's head, as an ordered LIMIT 1 (an index read even for a key holding most rows)
      AND (SELECT e.available_at FROM ${t.message} e WHERE e.key = c.key AND e.status = 'PENDING'
            ORDER BY e.seq LIMIT 1) <= ${now})
    ORDER BY c.pos`

/**
 * One key's head: its first `PENDING` row in `seq` order (one entry of the `(key, seq) WHERE
 * PENDING` index).
 */
export const keyHead = (t: Tables, key: string) =>
  `SELECT m.seq, m.available_at FROM ${t.message} m
    WHERE m.key = ${key} AND m.status = 'PENDING'
    ORDER BY m.seq
    LIMIT 1`

/**
 * One key's claimable prefix up to `seq <= cut`: its `PENDING` rows in `seq` order, at most
 * `maxPerKey`, up to the first one still backing off (`available_at > now`). The `(key, seq)
 * WHERE PENDING` index range ends at the cut, so a key with a long backlog is read only as far
 * as the batch can reach.
 */
export const keyPrefixUpTo = (t: Tables, key: string, now: string, maxPerKey: string, cut: string) =>
  `SELECT w.id, w.seq FROM (
      SELECT m.id, m.seq, bool_and(m.available_at <= ${now}) OVER (ORDER BY m.seq) AS open
        FROM ${t.message} m
       WHERE m.key = ${key} AND m.status = 'PENDING' AND m.seq <= ${cut}
       ORDER BY m.seq
       LIMIT ${maxPerKey}
    ) w WHERE w.open`

/**
 * Every claim function's first statements since migration 3: nothing to claim for a zero limit,
 * and the isolation guard.
 */
export const claimGuard = `     IF p_limit <= 0 OR p_max_per_key <= 0 THEN
       RETURN;
     END IF;
     -- The second snapshot is what makes the key lock meaningful; REPEATABLE READ would reuse
     -- the first one and could hand a key's later rows to a second relay.
     IF current_setting('transaction_isolation') <> 'read committed' THEN
       RAISE EXCEPTION 'outbox claim needs READ COMMITTED, the transaction is %',
         current_setting('transaction_isolation') USING ERRCODE = '25000';
     END IF;
`

/** The claim function's signature since migration 4, up to its `DECLARE`. */
export const claimHeader = (t: Tables) => `CREATE OR REPLACE FUNCTION ${t.claimFunction}(
     p_owner text, p_limit integer, p_max_per_key integer, p_now timestamptz, p_lease_millis bigint,
     p_failed_head_blocks boolean)
   RETURNS SETOF ${t.message}
   LANGUAGE plpgsql VOLATILE AS $claim$
   DECLARE
`

/**
 * The claim function since migration 3, a PL/pgSQL function so it runs in one round trip yet
 * takes two snapshots (the frozen one of migration 2, `claimV2.ts`, has the same contract).
 *
 * Why a function: with READ COMMITTED and `SKIP LOCKED` alone, two relays can both see a key's
 * rows as `PENDING` (each statement has its own snapshot) and split its prefix between them.
 * Phase 1 takes `pg_try_advisory_xact_lock(space, hashtext(key))` for each candidate key (a key
 * another claimer holds is skipped, not waited on). Phase 2 is a new statement, so it reads a
 * snapshot taken AFTER the locks were granted: every earlier claim of those keys has committed
 * and is visible, and no other claim of them can run until this transaction ends. Rows without
 * a key need no key lock: `FOR UPDATE SKIP LOCKED` is enough for them.
 *
 *
 * - Phase 1 (unchanged): walk the candidate scan, try-lock each new key, stop at `limit` slots.
 * - Phase 2, one statement under a fresh snapshot: each locked key's *head* (first `PENDING`
 *   row; the key counts only when the head is available and nothing of the key is
 *   `DISPATCHING`), the key-less candidates (`FOR UPDATE SKIP LOCKED`), then the *cut*: the
 *   `limit`-th smallest `seq` among heads and key-less rows. The batch is the `limit` smallest
 *   `seq`s of the union of the keys' prefixes, and the heads alone are `limit` members of that
 *   union, so no row above the cut can make the batch: each key's prefix is read only up to
 *   it. With many keys (the common case) that is one row per key instead of up to `maxPerKey`
 *   (2,000 index and heap reads for 100 keys of 20 rows; see docs/postgres.md). A cut never
 *   splits a prefix from the front: it keeps each key's rows from its head up to a `seq`.
 */
export const claimFunctionV3 = (t: Tables) =>
  `CREATE OR REPLACE FUNCTION ${t.claimFunction}(
     p_owner text, p_limit integer, p_max_per_key integer, p_now timestamptz, p_lease_until timestamptz)
   RETURNS SETOF ${t.message}
   LANGUAGE plpgsql VOLATILE AS $claim$
   DECLARE
     candidate record;
     locked_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     slots integer := 0;
   BEGIN
${claimGuard}     -- Phase 1: discover and lock. Each key comes up once, with an available head; the scan reads at most
     -- limit * 20 + 1000 rows (a hot key with a long backlog must not make it a table scan).
     FOR candidate IN ${candidateHeads(t, "p_now", "LEAST(p_limit, 100000) * 20 + 1000")} LOOP
       IF candidate.key IS NULL THEN
         unkeyed := unkeyed || candidate.id;
         slots := slots + 1;
       ELSIF pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(candidate.key)) THEN
         locked_keys := locked_keys || candidate.key;
         slots := slots + 1;
       END IF;
       EXIT WHEN slots >= p_limit;
     END LOOP;
     IF slots = 0 THEN
       RETURN;
     END IF;
     -- Phase 2: decide under the locks, in one statement (a snapshot taken after they were granted).
     RETURN QUERY
     WITH heads AS (
       SELECT k.key, h.seq
         FROM (SELECT DISTINCT u.key FROM unnest(locked_keys) AS u(key)) AS k
         CROSS JOIN LATERAL (${keyHead(t, "k.key")}) h
        WHERE h.available_at <= p_now
          AND NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = k.key AND d.status = 'DISPATCHING')
     ), loose AS (
       SELECT m.id, m.seq FROM ${t.message} m
        WHERE m.id = ANY (unkeyed) AND m.status = 'PENDING' AND m.available_at <= p_now
        FOR UPDATE SKIP LOCKED
     ), cut AS (
       SELECT COALESCE(
                (SELECT s.seq FROM (SELECT heads.seq FROM heads UNION ALL SELECT loose.seq FROM loose) s
                  ORDER BY s.seq OFFSET p_limit - 1 LIMIT 1),
                9223372036854775807) AS seq
     ), keyed AS (
       SELECT p.id, p.seq
         FROM heads k CROSS JOIN cut
         CROSS JOIN LATERAL (${keyPrefixUpTo(t, "k.key", "p_now", "p_max_per_key", "cut.seq")}) p
     ), chosen AS (
       SELECT c.id FROM (SELECT * FROM keyed UNION ALL SELECT * FROM loose) c ORDER BY c.seq LIMIT p_limit
     )
     UPDATE ${t.message} m
        SET status = 'DISPATCHING', lease_owner = p_owner, lease_expires_at = p_lease_until, updated_at = p_now
       FROM chosen
      WHERE m.id = chosen.id AND m.status = 'PENDING'
     RETURNING m.*;
   END
   $claim$`

/**
 * A key's first `FAILURE` row by `seq` (one entry of the `(key, seq) WHERE FAILURE` index of
 * migration 4), or NULL. Under `failedHead: "block"` it blocks every younger row of its key.
 */
export const firstFailure = (t: Tables, key: string) =>
  `(SELECT f.seq FROM ${t.message} f WHERE f.key = ${key} AND f.status = 'FAILURE' ORDER BY f.seq LIMIT 1)`

/**
 * The candidate scan since migration 4: as {@link candidateHeads}, and when `failedBlocks` (a
 * boolean expression) holds, a key whose head is younger than a `FAILURE` row of the key is no
 * candidate (a failed head keeps its key's order). The head and the first failure
 * are one index entry each.
 */
export const candidateHeadsV4 = (t: Tables, now: string, readLimit: string, failedBlocks: string) =>
  `SELECT c.id, c.key FROM (
      SELECT DISTINCT ON (r.key IS NULL, COALESCE(r.key, r.id::text)) r.id, r.key, r.pos
        FROM (SELECT m.id, m.key, row_number() OVER (ORDER BY m.available_at, m.seq) AS pos
                FROM ${t.message} m
               WHERE m.status = 'PENDING' AND m.available_at <= ${now}
               ORDER BY m.available_at, m.seq
               LIMIT ${readLimit}) r
       ORDER BY r.key IS NULL, COALESCE(r.key, r.id::text), r.pos
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
 * The claim function since migration 4. The algorithm of {@link claimFunctionV3},
 * with two changes:
 *
 * - `p_failed_head_blocks` (the relay's `failedHead: "block"`, the default): a `FAILURE` row
 *   blocks the younger rows of its key. A key whose head is younger than its first `FAILURE`
 *   row is no candidate, and a key's prefix ends before its first `FAILURE` row.
 * - The lease expiry is the database clock's `now()` plus `p_lease_millis`, not a time the
 *   relay host computed: stale recovery compares it with the same clock. `p_now` (the relay's
 *   clock) still decides availability, as `available_at` is written from the same clock.
 */
export const claimFunctionV4 = (t: Tables) =>
  `${claimHeader(t)}     candidate record;
     locked_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     slots integer := 0;
   BEGIN
${claimGuard}     -- Phase 1: discover and lock. Each key comes up once, with an available head not blocked by a
     -- FAILURE row; the scan reads at most limit * 20 + 1000 rows.
     FOR candidate IN ${candidateHeadsV4(t, "p_now", "LEAST(p_limit, 100000) * 20 + 1000", "p_failed_head_blocks")} LOOP
       IF candidate.key IS NULL THEN
         unkeyed := unkeyed || candidate.id;
         slots := slots + 1;
       ELSIF pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(candidate.key)) THEN
         locked_keys := locked_keys || candidate.key;
         slots := slots + 1;
       END IF;
       EXIT WHEN slots >= p_limit;
     END LOOP;
${claimFinish(t)}`

/** The end of every claim function since migration 4: nothing locked, nothing to do; else phase 2. */
export const claimFinish = (t: Tables) => `     IF slots = 0 THEN
       RETURN;
     END IF;
${claimPhase2(t)}   END
   $claim$`

/**
 * Phase 2 of the claim since migration 4, in every function since (through {@link claimFinish}):
 * under the key locks and in a fresh snapshot, each locked key's head and prefix up to the cut
 * and the key-less candidates, claimed in one statement.
 */
const claimPhase2 = (
  t: Tables
) => `     -- Phase 2: decide under the locks, in one statement (a snapshot taken after they were granted).
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
`
