// The claim and recovery queries read indexes, not the whole table, at 100k rows: the plans
// PostgreSQL picks both for literal values and for the generic plan PL/pgSQL caches.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { candidateHeadsV4, firstFailure, keyHead, keyPrefixUpTo } from "../src/internal/claim.ts"
import { candidateWindow } from "../src/internal/claimV6.ts"
import { countByStatus } from "../src/internal/statuses.ts"
import { fastStatement } from "../src/internal/transition.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const Live = Layer.provideMerge(freshTables(), pgClient())

describe("claim query plans at 100k rows", () => {
  it.effect(
    "candidate scan, key head and prefix, in-flight probe, stale scan, mark and purge use their indexes",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        // 100k rows as a long-running outbox looks: mostly finished, a backlog, some in flight.
        yield* sql.unsafe(`
        INSERT INTO ${t.message} (id, topic, key, payload, status, available_at, created_at, updated_at,
                                  lease_owner, lease_expires_at)
        SELECT gen_random_uuid(), 'orders', 'user-' || (g % 5000), '\\x00'::bytea,
               CASE WHEN g <= 87900 THEN 'PUBLISHED' WHEN g <= 88000 THEN 'FAILURE'
                    WHEN g <= 99000 THEN 'PENDING' ELSE 'DISPATCHING' END,
               now() - interval '1 hour' + g * interval '1 millisecond', now(), now(),
               CASE WHEN g > 99000 THEN 'relay' END, CASE WHEN g > 99000 THEN now() + interval '1 minute' END
          FROM generate_series(1, 100000) AS g`).unprepared
        yield* sql.unsafe(`ANALYZE ${t.message}`).unprepared
        const [{ n }] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(t.message)}`
        assert.strictEqual(n, 100_000)

        const queries = {
          candidates: candidateHeadsV4(t, "$1", "3000", "true"),
          // the live claim's steps: the oldest rows first, then further from where the last one ended
          firstStep: candidateWindow(t, "$1", "210", "true", "'-infinity'::timestamptz", "0"),
          // since migration 16: a window that starts where the one before it ended
          window: candidateWindow(t, "$1", "3000", "true", "$1 - interval '30 minutes'", "50000"),
          failure: `SELECT ${firstFailure(t, "'user-42'")} -- $1`,
          head: `${keyHead(t, "'user-42'")} -- $1`,
          prefix: keyPrefixUpTo(t, "'user-42'", "$1", "10", "90000"),
          inFlight: `SELECT 1 FROM ${t.message} d WHERE d.key = 'user-42' AND d.status = 'DISPATCHING'`,
          stale: `SELECT * FROM ${t.message} WHERE status = 'DISPATCHING' AND lease_expires_at < $1
                 ORDER BY lease_expires_at, seq LIMIT 100`,
          // retention, as PgOutboxStore.purge spells it, with a cut-off older than every row (when
          // most rows qualify, a sequential scan that stops after 100 is the right plan; so it is
          // for the generic plan, which cannot know the cut-off: only the custom plan is checked)
          purge: `SELECT m.id FROM ${t.message} m WHERE m.status = ANY (ARRAY['PUBLISHED'])
                  AND m.status NOT IN ('PENDING', 'DISPATCHING')
                  AND m.updated_at < $1 - interval '1 day'
                LIMIT 100 FOR UPDATE OF m SKIP LOCKED`
        }
        const plans: Record<string, string> = {}
        yield* sql.withTransaction(
          Effect.gen(function* () {
            for (const mode of ["force_custom_plan", "force_generic_plan"]) {
              yield* sql.unsafe(`SET LOCAL plan_cache_mode = ${mode}`).unprepared
              for (const [name, text] of Object.entries(queries)) {
                const statement = `plan_${name}_${mode}`
                yield* sql.unsafe(`PREPARE ${statement} (timestamptz) AS ${text.replace(/\$1/g, "$1::timestamptz")}`)
                  .unprepared
                const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN EXECUTE ${statement} (now())`)
                  .unprepared
                plans[`${name}/${mode}`] = rows.map((r) => r["QUERY PLAN"]).join("\n")
              }
            }
          })
        )
        // the mark's fast path: a nested loop over the primary key, in the order of the (sorted) ids
        const ids = yield* sql<{ ids: string }>`SELECT array_agg(id ORDER BY id)::text AS ids FROM (
          SELECT id FROM ${sql.literal(t.message)} WHERE status = 'DISPATCHING' LIMIT 100) d`
        yield* sql.withTransaction(
          Effect.gen(function* () {
            for (const mode of ["force_custom_plan", "force_generic_plan"]) {
              yield* sql.unsafe(`SET LOCAL plan_cache_mode = ${mode}`).unprepared
              const statement = `plan_mark_${mode}`
              yield* sql.unsafe(`PREPARE ${statement} (uuid[], int4[], text[], text, text, text, float8, float8, boolean, text)
            AS ${fastStatement(t, false)}`).unprepared
              const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(
                `EXPLAIN EXECUTE ${statement} ('${ids[0]!.ids}', array_fill(0, ARRAY[100]), array_fill('1'::text, ARRAY[100]),
               'DISPATCHING', 'PUBLISHED', NULL, 1764000000000, 1764000000000, true, NULL)`
              ).unprepared
              plans[`mark/${mode}`] = rows.map((r) => r["QUERY PLAN"]).join("\n")
            }
          })
        )
        delete plans["purge/force_generic_plan"]
        console.log(
          "PLAN firstStep generic\n" +
            plans["firstStep/force_generic_plan"] +
            "\nPLAN window custom\n" +
            plans["window/force_custom_plan"]
        )
        for (const [name, plan] of Object.entries(plans)) {
          assert.notMatch(plan, /Seq Scan/, `${name} scans the table:\n${plan}`)
        }
        assert.match(plans["candidates/force_generic_plan"]!, /message_pending_idx/)
        // the in-flight hint probes only DISPATCHING rows (per key, or hashed once)
        assert.match(plans["candidates/force_generic_plan"]!, /message_dispatching_idx/)
        // the head check probes the key's own waiting rows
        assert.match(plans["candidates/force_generic_plan"]!, /message_pending_key_idx/)
        // a FAILURE row blocks its key: one entry of the FAILURE index per head
        assert.match(plans["candidates/force_generic_plan"]!, /message_failure_key_idx/)
        assert.match(plans["purge/force_custom_plan"]!, /message_status_idx/)
        for (const step of ["firstStep", "window"]) {
          assert.match(plans[`${step}/force_generic_plan`]!, /message_pending_idx/)
          assert.match(plans[`${step}/force_generic_plan`]!, /message_pending_key_idx/)
          // the probes (the head joined, the in-flight and FAILURE sub-plans) filter the rows coming
          // out of the sort by position, one by one as the claim's walk reads them: a walk that
          // stops after `limit` slots probes only the keys it read
          for (const mode of ["force_custom_plan", "force_generic_plan"]) {
            assert.match(
              plans[`${step}/${mode}`]!,
              /^\s*Nested Loop Left Join\b[^\n]*\n\s*Join Filter: [^\n]*\n\s*Filter: [^\n]*SubPlan[^\n]*\n\s*-> {2}Sort\b[^\n]*\n\s*Sort Key: o\.pos\n/,
              `${step}, ${mode}:\n${plans[`${step}/${mode}`]}`
            )
          }
        }
        for (const mode of ["force_custom_plan", "force_generic_plan"]) {
          assert.match(plans[`head/${mode}`]!, /message_pending_key_idx/)
          assert.match(plans[`failure/${mode}`]!, /message_failure_key_idx/)
          assert.match(plans[`prefix/${mode}`]!, /message_pending_key_idx/)
          assert.match(plans[`inFlight/${mode}`]!, /message_dispatching_idx/)
          assert.match(plans[`stale/${mode}`]!, /message_dispatching_idx/)
          assert.match(
            plans[`mark/${mode}`]!,
            /Nested Loop[^\n]*\n\s*-> {2}Function Scan on r\b[\s\S]*Index Scan using \S*message_pkey/
          )
        }

        // stats (sampled into gauges on a schedule) can count every status from a partial index:
        // each part's predicate is provable (with sequential scans off, none is left; whether an
        // index-only scan beats reading a table of tiny rows is the planner's call, and depends on
        // the visibility map, so that is not asserted)
        const statsPlan = yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql.unsafe(`SET LOCAL enable_seqscan = off`).unprepared
            const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${countByStatus(t)}`).unprepared
            return rows.map((r) => r["QUERY PLAN"]).join("\n")
          })
        )
        assert.notMatch(statsPlan, /Seq Scan/, statsPlan)
        assert.match(statsPlan, /message_status_idx/)
        assert.match(statsPlan, /message_pending_idx|message_pending_key_idx/)
        assert.match(statsPlan, /message_dispatching_idx/)

        // and the claim itself, at this size: a full batch, in well under a second
        const store = yield* PgOutboxStore.make()
        const started = Date.now()
        const batch = yield* store.claim({
          owner: "r",
          limit: 100,
          maxPerKey: 10,
          leaseMillis: 30_000,
          now: Date.now()
        })
        const elapsed = Date.now() - started
        assert.strictEqual(batch.length, 100)
        assert.isBelow(elapsed, 1_000, `claim took ${elapsed} ms`)

        // a hot key holding most waiting rows: the candidate scan's head check stays an index read
        // (as "NOT EXISTS an earlier row" the planner made it a sequential scan per candidate)
        yield* sql.unsafe(`
        INSERT INTO ${t.message} (id, topic, key, payload, status, available_at, created_at, updated_at)
        SELECT gen_random_uuid(), 'orders', 'hot', '\\x00'::bytea, 'PENDING',
               now() - interval '2 hours' + g * interval '1 millisecond', now(), now()
          FROM generate_series(1, 30000) AS g`).unprepared
        yield* sql.unsafe(`DELETE FROM ${t.message} WHERE key <> 'hot'`).unprepared
        yield* sql.unsafe(`VACUUM ANALYZE ${t.message}`).unprepared
        yield* sql.withTransaction(
          Effect.gen(function* () {
            for (const mode of ["force_custom_plan", "force_generic_plan"]) {
              yield* sql.unsafe(`SET LOCAL plan_cache_mode = ${mode}`).unprepared
              yield* sql.unsafe(
                `PREPARE plan_hot_${mode} (timestamptz) AS ${candidateHeadsV4(t, "$1", "3000", "true")}`
              ).unprepared
              const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN EXECUTE plan_hot_${mode} (now())`)
                .unprepared
              const plan = rows.map((r) => r["QUERY PLAN"]).join("\n")
              assert.notMatch(plan, /Seq Scan/, `hot key, ${mode}:\n${plan}`)
            }
          })
        )
      }).pipe(Effect.provide(Live)),
    { timeout: 120_000 }
  )
})
