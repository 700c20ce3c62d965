// Migration 3 upgrades a live outbox: a schema at migration 2 with rows in every state moves to 3
// (new indexes, new claim function, autovacuum settings), and those rows still claim, mark,
// recover and purge correctly.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000

const draft = (key: string | null, overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "orders",
  key,
  partition: null,
  headers: {},
  payload: new Uint8Array([1, 2, 3]),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0,
  ...overrides
})

const indexesOf = (schema: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes
      WHERE schemaname = ${schema} AND tablename = 'outbox_message' ORDER BY 1`
  ).pipe(Effect.map((rows) => rows.map((r) => r.name)))

describe("PgMigrations: 2 -> 4 on a populated table", () => {
  it.effect("rows written at migration 2 claim, mark, recover and purge after migrations 3 and 4", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const schema = freshSchema()
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
      const t = yield* PgTables.make({ schema })
      yield* sql.unsafe(`CREATE SCHEMA "${schema}"`).unprepared
      const all = PgMigrations.migrations(t)
      const applied = yield* Migrator.make({})({
        loader: Migrator.fromRecord({ "1_tables": all["1_tables"]!, "2_claim_function": all["2_claim_function"]! }),
        table: t.migrations
      })
      assert.deepStrictEqual(applied, [
        [1, "tables"],
        [2, "claim_function"]
      ])
      assert.include(yield* indexesOf(schema), "outbox_message_status_updated_idx")

      // At migration 2 (claimed by the v2 function): k1 in flight, k2 and k3 waiting, one published,
      // one deferred, one key-less.
      const store = yield* PgOutboxStore.make().pipe(Effect.provideService(PgTables.PgTables, t))
      // An old relay calls the function of migration 2 (host-clock lease end).
      const oldClaim = sql<{ id: string }>`SELECT id FROM ${sql.literal(t.claimFunction)}(
          'old-relay'::text, 1::int4, 10::int4, ${new Date(T0)}::timestamptz, ${new Date(T0 + 1_000)}::timestamptz)`
      const inFlight = draft("k1")
      yield* store.insert([inFlight])
      const claimedBefore = yield* oldClaim
      assert.deepStrictEqual(
        claimedBefore.map((m) => m.id),
        [inFlight.id]
      )
      const done = draft("k9")
      yield* store.insert([done])
      yield* oldClaim
      yield* store.transition([{ id: done.id, from: ["DISPATCHING"], to: "PUBLISHED", now: T0 + 1, patch: {} }])
      const k1Later = draft("k1")
      const k2 = [draft("k2"), draft("k2"), draft("k2")]
      const k3 = [draft("k3"), draft("k3", { availableAt: T0 + 60_000 }), draft("k3")]
      const loose = draft(null)
      const deferred = draft("k4", { status: "PREQUEUED" })
      yield* store.insert([k1Later, ...k2, ...k3, loose, deferred])

      const upgraded = yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, t))
      assert.deepStrictEqual(upgraded, [
        [3, "hot_path"],
        [4, "failure_blocks_key"],
        [5, "stale_recovery"],
        [6, "parked"],
        [7, "lifecycle_group"],
        [8, "log_events"],
        [9, "log_progress"],
        [10, "log_quarantine"],
        [11, "log_gap"],
        [12, "inbox_partitions"],
        [13, "log_part"],
        [14, "claimed_payload"],
        [15, "claim_first_rows"],
        [16, "claim_windows"],
        [17, "waiting_keys"]
      ])
      assert.deepStrictEqual(yield* indexesOf(schema), [
        "outbox_message_dispatching_idx",
        "outbox_message_failure_key_idx",
        "outbox_message_pending_idx",
        "outbox_message_pending_key_idx",
        "outbox_message_pkey",
        "outbox_message_status_idx"
      ])
      const [options] = yield* sql<{ reloptions: ReadonlyArray<string> }>`SELECT reloptions FROM pg_class
        WHERE oid = ${`"${schema}"."outbox_message"`}::regclass`
      assert.include(options!.reloptions, "autovacuum_vacuum_scale_factor=0")

      // k1 is still in flight (its DISPATCHING row from before blocks it); k2 whole, k3 up to its
      // row backing off, the key-less row; the deferred one stays.
      const claimed = yield* store.claim({
        owner: "new-relay",
        limit: 100,
        maxPerKey: 10,
        leaseMillis: 30_000,
        now: T0 + 10
      })
      assert.deepStrictEqual(
        claimed.map((m) => m.id),
        [k2[0]!.id, k2[1]!.id, k2[2]!.id, k3[0]!.id, loose.id]
      )
      const marked = yield* store.transition(
        claimed.map((m, i) => ({
          id: m.id,
          from: ["DISPATCHING"] as const,
          to: "PUBLISHED" as const,
          acceptIfIn: ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"] as const,
          now: T0 + 20,
          patch: { receipt: { topic: "orders", partition: 0, offset: String(i) }, publishedAt: T0 + 20, lease: null }
        }))
      )
      assert.deepStrictEqual(
        marked.map((o) => `${o.outcome} ${o.current}`),
        claimed.map(() => "applied PUBLISHED")
      )
      assert.deepStrictEqual(Option.getOrThrow(yield* store.get(k2[2]!.id)).receipt, {
        topic: "orders",
        partition: 0,
        offset: "2"
      })

      // The old relay's lease has expired: stale recovery finds its row through the new index.
      const stale = (yield* store.findStale({ now: T0 + 5_000, limit: 10 })).rows
      assert.deepStrictEqual(
        stale.map((m) => m.id),
        [inFlight.id]
      )
      const requeued = yield* store.transition([
        {
          id: inFlight.id,
          from: ["DISPATCHING"],
          to: "PENDING",
          leaseOwner: "old-relay",
          now: T0 + 5_000,
          patch: { lease: null, lastError: "lease expired" }
        }
      ])
      assert.strictEqual(requeued[0]!.outcome, "applied")
      const k1Claim = yield* store.claim({
        owner: "new-relay",
        limit: 100,
        maxPerKey: 10,
        leaseMillis: 30_000,
        now: T0 + 6_000
      })
      assert.deepStrictEqual(
        k1Claim.map((m) => m.id),
        [inFlight.id, k1Later.id]
      )

      // Retention purges the published rows, the one from before the upgrade included.
      const purged = yield* store.purge({ statuses: ["PUBLISHED"], olderThan: T0 + 10_000, limit: 100 })
      assert.strictEqual(purged, 6)
      const stats = yield* store.stats(T0 + 7_000)
      assert.deepStrictEqual(stats.byStatus, { DISPATCHING: 2, PENDING: 2, PREQUEUED: 1 })
      assert.strictEqual(stats.staleLeases, 0)
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
