import type { Tables } from "../PgTables.ts"

/**
 * The claim function as migration 2 created it, frozen: migration 2 must create exactly this on
 * a fresh database (migration 3 replaces it, migration 4 drops it). A literal on purpose: it
 * shares no helper with the live claim (`claim.ts`), so editing that can never change it. Only
 * the names of the outbox's tables and its advisory-lock space are filled in.
 *
 * The claim runs as a PL/pgSQL function so it takes one round trip yet two snapshots: phase 1
 * try-locks each candidate key (`pg_try_advisory_xact_lock`), phase 2 is a new statement whose
 * snapshot sees every earlier claim of those keys, and takes each key's `PENDING` prefix when
 * nothing of the key is `DISPATCHING` (see docs/postgres.md).
 */
export const claimFunctionV2 = (t: Tables): string =>
  `CREATE OR REPLACE FUNCTION ${t.claimFunction}(
     p_owner text, p_limit integer, p_max_per_key integer, p_now timestamptz, p_lease_until timestamptz)
   RETURNS SETOF ${t.message}
   LANGUAGE plpgsql VOLATILE AS $claim$
   DECLARE
     candidate record;
     locked_keys text[] := '{}';
     seen_keys text[] := '{}';
     unkeyed uuid[] := '{}';
     slots integer := 0;
     scanned integer := 0;
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
     -- The LIMIT is the loop's own exit bound below. Without it PostgreSQL plans the cursor as
     -- a sequential scan and sort of every PENDING row, on every claim (O(backlog); found by
     -- bench/src/experiments/ClaimLimit.ts).
     FOR candidate IN SELECT m.id, m.key FROM ${t.message} m
    WHERE m.status = 'PENDING' AND m.available_at <= p_now
      AND (m.key IS NULL OR NOT EXISTS (
        SELECT 1 FROM ${t.message} d WHERE d.key = m.key AND d.status = 'DISPATCHING'))
    ORDER BY m.available_at, m.seq LIMIT LEAST(p_limit, 100000) * 20 + 1000 LOOP
       scanned := scanned + 1;
       IF candidate.key IS NULL THEN
         unkeyed := unkeyed || candidate.id;
         slots := slots + 1;
       ELSIF NOT (candidate.key = ANY (seen_keys)) THEN
         seen_keys := seen_keys || candidate.key;
         IF pg_try_advisory_xact_lock(${t.locks.claimKey}, hashtext(candidate.key)) THEN
           locked_keys := locked_keys || candidate.key;
           slots := slots + 1;
         END IF;
       END IF;
       -- Bounded: a hot key with a long backlog must not turn one claim into a table scan.
       EXIT WHEN slots >= p_limit OR scanned >= LEAST(p_limit, 100000) * 20 + 1000;
     END LOOP;
     IF slots = 0 THEN
       RETURN;
     END IF;
     RETURN QUERY
     WITH keyed AS (
       SELECT p.id, p.seq
         FROM unnest(locked_keys) AS k(key)
         CROSS JOIN LATERAL (SELECT w.id, w.seq FROM (
      SELECT m.id, m.seq, bool_and(m.available_at <= p_now) OVER (ORDER BY m.seq) AS open
        FROM ${t.message} m
       WHERE m.key = k.key AND m.status = 'PENDING'
       ORDER BY m.seq
       LIMIT p_max_per_key
    ) w WHERE w.open) p
        WHERE NOT EXISTS (SELECT 1 FROM ${t.message} d WHERE d.key = k.key AND d.status = 'DISPATCHING')
     ), loose AS (
       SELECT m.id, m.seq FROM ${t.message} m
        WHERE m.id = ANY (unkeyed) AND m.status = 'PENDING' AND m.available_at <= p_now
        FOR UPDATE SKIP LOCKED
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
