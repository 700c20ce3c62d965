// The claim's key locks: a claim holds the advisory lock of each key it takes, and of no key its
// probes turn away (a head backing off, a key in flight, a key behind a FAILURE row), nor for
// key-less rows. The claim takes a key's lock only after the key's probes; taken first, it would
// hold keys the claim cannot use and keep other relays off them.
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000

const StoreLive = PgOutboxStore.layer().pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(2)))

const row = (key: string | null, n: number, availableAt = T0): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "t",
  key,
  partition: null,
  headers: {},
  payload: new TextEncoder().encode(`${key ?? "-"}:${n}`),
  status: "PENDING",
  availableAt,
  createdAt: T0
})

const texts = (batch: ReadonlyArray<OutboxMessage>) => batch.map((m) => new TextDecoder().decode(m.payload)).sort()

describe("PgOutboxStore claim key locks", () => {
  it.effect("a claim holds the lock of each key it takes and of no key its probes turn away", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      const claim = (owner: string, limit: number) =>
        store.claim({ owner, limit, maxPerKey: 10, leaseMillis: 60_000, now: T0 + 1 })

      // "busy" stays in flight and "failed" gets a FAILURE head: both hold younger PENDING rows.
      yield* store.insert([row("busy", 1), row("failed", 1), row("busy", 2), row("failed", 2)])
      const setup = yield* claim("setup", 2)
      assert.deepStrictEqual(texts(setup), ["busy:1", "failed:1"])
      const failed = setup.find((m) => m.key === "failed")!
      const [outcome] = yield* store.transition([
        { id: failed.id, from: ["DISPATCHING"], to: "FAILURE", now: T0 + 1, patch: { lastError: "refused" } }
      ])
      assert.strictEqual(outcome!.outcome, "applied")
      // "waiting" has its head backing off; a, b and c are ready; one row has no key.
      yield* store.insert([row("a", 1), row("waiting", 1, T0 + 60_000), row("b", 1), row(null, 1), row("c", 1)])

      const [batch, locked] = yield* sql.withTransaction(
        Effect.gen(function* () {
          const batch = yield* claim("relay", 10)
          // The claim's key locks this transaction holds: `pg_try_advisory_xact_lock(space,
          // hashtext(key))`, both halves as unsigned 32-bit numbers in pg_locks.
          const locked = yield* sql<{ key: string }>`
            SELECT k.key FROM unnest(${["a", "b", "c", "busy", "failed", "waiting"]}::text[]) AS k(key)
              JOIN pg_locks l ON l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 2
               AND l.classid::bigint = (${t.locks.claimKey}::int4)::bigint & 4294967295
               AND l.objid::bigint = hashtext(k.key)::bigint & 4294967295
             ORDER BY k.key`
          const all = yield* sql<{ n: number }>`
            SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`
          return [batch, { keys: locked.map((r) => r.key), count: all[0]!.n }] as const
        })
      )
      assert.deepStrictEqual(texts(batch), ["-:1", "a:1", "b:1", "c:1"])
      assert.deepStrictEqual(locked, { keys: ["a", "b", "c"], count: 3 })
    }).pipe(Effect.provide(StoreLive))
  )
})
