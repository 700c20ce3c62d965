// Compare-and-set under real contention, and how database trouble surfaces.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const StoreLive = PgOutboxStore.layer().pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(6)))

const message = (): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "t",
  key: null,
  partition: null,
  headers: {},
  payload: new Uint8Array(1),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0
})

describe("PgOutboxStore under contention and failure", () => {
  it.live(
    "two batches racing on the same rows: each row's compare-and-set succeeds exactly once",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const rows = Array.from({ length: 40 }, message)
        yield* store.insert(rows)
        yield* store.claim({ owner: "r", limit: 100, maxPerKey: 100, leaseMillis: 1_000, now: T0 })
        for (let round = 0; round < 5; round++) {
          // publisher acknowledges while stale recovery hands the same rows back, in opposite order
          const [published, requeued] = yield* Effect.all(
            [
              store.transition(
                rows.map((m) => ({
                  id: m.id,
                  from: ["DISPATCHING"],
                  to: "PUBLISHED",
                  now: T0 + 1,
                  patch: { publishedAt: T0 + 1 }
                }))
              ),
              store.transition(
                [...rows].reverse().map((m) => ({
                  id: m.id,
                  from: ["DISPATCHING"],
                  to: "PENDING",
                  now: T0 + 1,
                  patch: { attempts: 1 }
                }))
              )
            ],
            { concurrency: 2 }
          )
          const requeuedById = new Map(requeued.map((o) => [o.id, o]))
          for (const p of published) {
            const r = requeuedById.get(p.id)!
            assert.strictEqual([p.outcome, r.outcome].filter((o) => o === "applied").length, 1, p.id)
            // the loser saw the winner's write, not the snapshot it started from
            const winner = p.outcome === "applied" ? "PUBLISHED" : "PENDING"
            assert.strictEqual(p.current, winner)
            assert.strictEqual(r.current, winner)
          }
          // reset: everything back to DISPATCHING for the next round
          yield* store.transition(
            rows.map((m) => ({ id: m.id, from: ["PUBLISHED"], to: "UNDER_PROCESSING", now: T0 + 2, patch: {} }))
          )
          const again = Array.from({ length: 40 }, message)
          rows.splice(0, rows.length, ...again)
          yield* store.insert(rows)
          yield* store.claim({ owner: "r", limit: 100, maxPerKey: 100, leaseMillis: 1_000, now: T0 })
        }
      }).pipe(Effect.provide(StoreLive)),
    60_000
  )

  it.effect("a transition naming a non-UUID id fails typed, fast path or not, and changes nothing", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const [a] = [message()]
      yield* store.insert([a!])
      yield* store.claim({ owner: "r", limit: 100, maxPerKey: 100, leaseMillis: 1_000, now: T0 })
      const mark = (id: string) => ({
        id: id as EventId,
        from: ["DISPATCHING"] as const,
        to: "PUBLISHED" as const,
        now: T0 + 1,
        patch: { receipt: { topic: "t", partition: 0, offset: "1" } }
      })
      // a uniform round (the fast path's shape) and a mixed one (the generic statement)
      for (const batch of [
        [mark(a!.id), mark("not-a-uuid")],
        [mark(a!.id), { ...mark("not-a-uuid"), to: "FAILURE" as const }]
      ]) {
        const error = yield* Effect.flip(store.transition(batch))
        assert.strictEqual(error._tag, "StoreError")
        assert.strictEqual(error.operation, "outbox.transition")
        assert.isFalse(error.retriable)
      }
      assert.strictEqual(Option.getOrThrow(yield* store.get(a!.id)).status, "DISPATCHING")
    }).pipe(Effect.provide(StoreLive))
  )

  it.effect("an unreachable database surfaces as a retriable StoreError naming the operation", () =>
    Effect.gen(function* () {
      const tables = yield* PgTables.make({ schema: "unreachable" })
      const store = yield* PgOutboxStore.make().pipe(Effect.provideService(PgTables.PgTables, tables))
      const error = yield* Effect.flip(store.claim({ owner: "r", limit: 1, maxPerKey: 1, leaseMillis: 1, now: T0 }))
      assert.strictEqual(error._tag, "StoreError")
      assert.strictEqual(error.operation, "outbox.claim")
      assert.isTrue(error.retriable)
      assert.match(error.reason, /ConnectionError/)
    }).pipe(
      Effect.provide(
        PgClient.layer({ url: Redacted.make("postgres://postgres@127.0.0.1:1/postgres"), connectTimeout: "2 seconds" })
      )
    )
  )

  it.live(
    "a write the database refuses as read-only (a demoted primary after a fail-over) is retriable, not a verdict",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const error = yield* Effect.flip(
          sql.withTransaction(Effect.andThen(sql`SET TRANSACTION READ ONLY`, store.insert([message()])))
        )
        assert.strictEqual(error._tag, "StoreError")
        assert.include(String((error as { reason?: unknown }).reason), "25006")
        assert.isTrue((error as { retriable?: unknown }).retriable === true)
      }).pipe(Effect.provide(StoreLive))
  )
})
