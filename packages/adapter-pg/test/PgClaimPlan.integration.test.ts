// The claim and recovery queries read indexes, not the whole table, at 100k rows: the plans
// PostgreSQL picks both for literal values and for the generic plan PL/pgSQL caches.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { candidateScan, keyPrefix } from "../src/internal/sql.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const Live = Layer.provideMerge(freshTables(), pgClient())

describe("claim query plans at 100k rows", () => {
  it.effect("candidate scan, key prefix, in-flight probe and stale scan use their partial indexes", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      // 100k rows as a long-running outbox looks: mostly finished, a backlog, some in flight.
      yield* sql.unsafe(`
        INSERT INTO ${t.message} (id, topic, key, payload, status, available_at, created_at, updated_at,
                                  lease_owner, lease_expires_at)
        SELECT gen_random_uuid(), 'orders', 'user-' || (g % 5000), '\\x00'::bytea,
               CASE WHEN g <= 88000 THEN 'PUBLISHED' WHEN g <= 99000 THEN 'PENDING' ELSE 'DISPATCHING' END,
               now() - interval '1 hour' + g * interval '1 millisecond', now(), now(),
               CASE WHEN g > 99000 THEN 'relay' END, CASE WHEN g > 99000 THEN now() + interval '1 minute' END
          FROM generate_series(1, 100000) AS g`).unprepared
      yield* sql.unsafe(`ANALYZE ${t.message}`).unprepared
      const [{ n }] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(t.message)}`
      assert.strictEqual(n, 100_000)

      const queries = {
        candidates: `${candidateScan(t, "$1")} LIMIT 100`,
        prefix: keyPrefix(t, "'user-42'", "$1", "10"),
        inFlight: `SELECT 1 FROM ${t.message} d WHERE d.key = 'user-42' AND d.status = 'DISPATCHING'`,
        stale: `SELECT * FROM ${t.message} WHERE status = 'DISPATCHING' AND lease_expires_at < $1
                 ORDER BY lease_expires_at, seq LIMIT 100`
      }
      const plans: Record<string, string> = {}
      yield* sql.withTransaction(Effect.gen(function*() {
        for (const mode of ["force_custom_plan", "force_generic_plan"]) {
          yield* sql.unsafe(`SET LOCAL plan_cache_mode = ${mode}`).unprepared
          for (const [name, text] of Object.entries(queries)) {
            const statement = `plan_${name}_${mode}`
            yield* sql.unsafe(`PREPARE ${statement} (timestamptz) AS ${text.replace(/\$1/g, "$1::timestamptz")}`).unprepared
            const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN EXECUTE ${statement} (now())`).unprepared
            plans[`${name}/${mode}`] = rows.map((r) => r["QUERY PLAN"]).join("\n")
          }
        }
      }))
      for (const [name, plan] of Object.entries(plans)) {
        assert.notMatch(plan, /Seq Scan/, `${name} scans the table:\n${plan}`)
      }
      assert.match(plans["candidates/force_generic_plan"]!, /message_pending_idx/)
      // the in-flight hint probes only DISPATCHING rows (per key, or hashed once)
      assert.match(plans["candidates/force_generic_plan"]!, /message_(dispatching_key|lease)_idx/)
      assert.match(plans["prefix/force_generic_plan"]!, /message_pending_key_idx/)
      assert.match(plans["inFlight/force_custom_plan"]!, /message_dispatching_key_idx/)
      assert.match(plans["stale/force_generic_plan"]!, /message_lease_idx/)

      // and the claim itself, at this size: a full batch, in well under a second
      const store = yield* PgOutboxStore.make()
      const started = Date.now()
      const batch = yield* store.claim({ owner: "r", limit: 100, maxPerKey: 10, leaseMillis: 30_000, now: Date.now() })
      const elapsed = Date.now() - started
      assert.strictEqual(batch.length, 100)
      assert.isBelow(elapsed, 1_000, `claim took ${elapsed} ms`)
    }).pipe(Effect.provide(Live)), { timeout: 120_000 })
})
