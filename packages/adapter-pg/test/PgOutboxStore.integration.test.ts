// The PostgreSQL outbox store against the real database, each test in its own schema.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000

const StoreLive = (options: PgOutboxStore.Options = {}) =>
  PgOutboxStore.layer(options).pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient()))

let counter = 0
const draft = (overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "orders",
  key: null,
  partition: null,
  headers: { "event-id": "x" },
  payload: new Uint8Array([counter++ % 256, 0, 255]),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0,
  ...overrides
})

const claimReq = (
  overrides: Partial<{ owner: string; limit: number; maxPerKey: number; now: number; leaseMillis: number }> = {}
) => ({
  owner: "relay-a",
  limit: 100,
  maxPerKey: 100,
  leaseMillis: 30_000,
  now: T0 + 1_000,
  ...overrides
})

describe("PgOutboxStore", () => {
  it.effect("insert then get round-trips every field, with times as epoch millis", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const m = draft({ key: "user-1", partition: 3, headers: { "event-id": "e", trace: "t" }, availableAt: T0 + 5 })
      yield* store.insert([m])
      const got = Option.getOrThrow(yield* store.get(m.id))
      assert.strictEqual(got.id, m.id)
      assert.strictEqual(got.topic, "orders")
      assert.strictEqual(got.key, "user-1")
      assert.strictEqual(got.partition, 3)
      assert.deepStrictEqual(got.headers, { "event-id": "e", trace: "t" })
      assert.deepStrictEqual([...got.payload], [...m.payload])
      assert.strictEqual(got.status, "PENDING")
      assert.strictEqual(got.attempts, 0)
      assert.strictEqual(got.availableAt, T0 + 5)
      assert.strictEqual(got.createdAt, T0)
      assert.strictEqual(got.updatedAt, T0)
      assert.isNull(got.leaseOwner)
      assert.isNull(got.receipt)
      assert.isTrue(Number.isInteger(got.seq))
      assert.isTrue(Option.isNone(yield* store.get(randomUUID() as EventId)))
      assert.isTrue(Option.isNone(yield* store.get("not-a-uuid" as EventId)))
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("insert joins the ambient transaction: a rollback leaves no row", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const m = draft()
      const failed = yield* Effect.flip(
        sql.withTransaction(store.insert([m]).pipe(Effect.andThen(Effect.fail("boom" as const))))
      )
      assert.strictEqual(failed, "boom")
      assert.isTrue(Option.isNone(yield* store.get(m.id)))
    }).pipe(Effect.provide(StoreLive()))
  )

  // Drafts are validated once, in core (Outbox.prepare); the store only reports, typed, what the
  // table itself refuses, and a refused batch writes nothing.
  it.effect("what the table refuses fails typed and writes nothing", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const good = draft()
      const bad = [draft({ topic: "" }), draft({ id: "nope" as EventId }), draft({ partition: -1 })]
      // one row (a VALUES list) and several (unnest) are different statements
      const batches = [...bad.map((row) => [row]), ...bad.map((row) => [good, row]), [good, { ...good }]]
      for (const batch of batches) {
        const error = yield* Effect.flip(store.insert(batch))
        assert.strictEqual(error._tag, "StoreError")
        assert.strictEqual(error.operation, "outbox.insert")
        assert.isFalse(error.retriable, error.reason)
      }
      assert.isTrue(Option.isNone(yield* store.get(good.id)))
      assert.deepStrictEqual(yield* store.insert([good]), { wakeUpQueued: false })
      const duplicate = yield* Effect.flip(store.insert([good]))
      assert.match(duplicate.reason, /already exists/)
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("claim leases available rows in seq order and skips rows backing off", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const a = draft(),
        b = draft({ availableAt: T0 + 60_000 }),
        c = draft(),
        d = draft({ status: "PREQUEUED" })
      yield* store.insert([a, b, c, d])
      const claimed = yield* store.claim(claimReq())
      assert.deepStrictEqual(
        claimed.map((m) => m.id),
        [a.id, c.id]
      )
      for (const m of claimed) {
        assert.strictEqual(m.status, "DISPATCHING")
        assert.strictEqual(m.leaseOwner, "relay-a")
        // the lease end is the database clock's now() + 30 s (M9), not the relay's now + 30 s
        assert.isBelow(Math.abs(m.leaseExpiresAt! - (Date.now() + 30_000)), 60_000)
        assert.strictEqual(m.updatedAt, T0 + 1_000)
      }
      assert.deepStrictEqual(yield* store.claim(claimReq()), [])
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("per key: a contiguous prefix, cut at maxPerKey, at a row backing off, and blocked while in flight", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const k1 = [draft({ key: "k1" }), draft({ key: "k1" }), draft({ key: "k1" })]
      const k2 = [draft({ key: "k2" }), draft({ key: "k2", availableAt: T0 + 60_000 }), draft({ key: "k2" })]
      const k3 = [draft({ key: "k3", availableAt: T0 + 60_000 }), draft({ key: "k3" })]
      yield* store.insert([...k1, ...k2, ...k3])
      const first = yield* store.claim(claimReq({ maxPerKey: 2 }))
      assert.deepStrictEqual(
        first.map((m) => m.id),
        [k1[0]!.id, k1[1]!.id, k2[0]!.id]
      )
      // k1 is in flight: its third row waits even though it is available.
      assert.deepStrictEqual(yield* store.claim(claimReq({ owner: "relay-b" })), [])
      // publish k1's rows: the key opens again.
      yield* store.transition(
        first
          .filter((m) => m.key === "k1")
          .map((m) => ({
            id: m.id,
            from: ["DISPATCHING"],
            to: "PUBLISHED",
            leaseOwner: "relay-a",
            now: T0 + 2_000,
            patch: { receipt: { topic: "orders", partition: 0, offset: "41" }, publishedAt: T0 + 2_000 }
          }))
      )
      const second = yield* store.claim(claimReq({ owner: "relay-b", now: T0 + 2_000 }))
      assert.deepStrictEqual(
        second.map((m) => m.id),
        [k1[2]!.id]
      )
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("a key blocked by a row backing off takes no slot: the batch fills with other keys", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      // k0's head is backing off; its later rows are available (and come first in the candidate
      // scan), but the key has nothing to give.
      const k0 = [
        draft({ key: "k0", availableAt: T0 + 60_000 }),
        draft({ key: "k0", availableAt: T0 - 2 }),
        draft({ key: "k0", availableAt: T0 - 1 })
      ]
      const others = [draft({ key: "k1" }), draft({ key: "k2" }), draft({ key: "k3" })]
      yield* store.insert([...k0, ...others])
      const claimed = yield* store.claim(claimReq({ limit: 2 }))
      assert.deepStrictEqual(
        claimed.map((m) => m.id),
        [others[0]!.id, others[1]!.id]
      )
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("claim refuses REPEATABLE READ, where its second snapshot would not be fresh", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      yield* store.insert([draft({ key: "k" })])
      const error = yield* Effect.flip(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
            return yield* store.claim(claimReq())
          })
        )
      )
      assert.strictEqual(error._tag, "StoreError")
      if (error._tag === "StoreError") {
        assert.strictEqual(error.operation, "outbox.claim")
        assert.match(error.reason, /READ COMMITTED/)
      }
      assert.strictEqual((yield* store.claim(claimReq())).length, 1)
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("claim with limit cuts in seq order and keeps each key's rows a prefix", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const rows = [draft({ key: "a" }), draft({ key: "b" }), draft({ key: "a" }), draft(), draft({ key: "b" })]
      yield* store.insert(rows)
      const claimed = yield* store.claim(claimReq({ limit: 3 }))
      assert.deepStrictEqual(
        claimed.map((m) => m.id),
        [rows[0]!.id, rows[1]!.id, rows[2]!.id]
      )
      assert.deepStrictEqual(yield* store.claim(claimReq({ limit: 0 })), [])
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("transition: one batch, outcomes in request order, lease checked, late receipts accepted", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const [a, b, c] = [draft(), draft(), draft()]
      yield* store.insert([a, b, c])
      yield* store.claim(claimReq())
      const missing = randomUUID() as EventId
      const out = yield* store.transition([
        { id: a.id, from: ["DISPATCHING"], to: "UNDER_PROCESSING", now: T0 + 3_000, patch: {} },
        { id: b.id, from: ["DISPATCHING"], to: "PUBLISHED", leaseOwner: "someone-else", now: T0 + 3_000, patch: {} },
        {
          id: c.id,
          from: ["DISPATCHING"],
          to: "PENDING",
          leaseOwner: "relay-a",
          now: T0 + 3_000,
          patch: { attempts: 1, availableAt: T0 + 9_000, lastError: "broker down" }
        },
        { id: missing, from: ["DISPATCHING"], to: "PUBLISHED", now: T0, patch: {} },
        // a's consumer ran ahead: the publisher's late acknowledgement is recorded, status kept
        {
          id: a.id,
          from: ["DISPATCHING"],
          to: "PUBLISHED",
          acceptIfIn: ["UNDER_PROCESSING", "SUCCESS"],
          now: T0 + 4_000,
          patch: { receipt: { topic: "orders", partition: 2, offset: "9007199254740993" }, publishedAt: T0 + 4_000 }
        }
      ])
      assert.deepStrictEqual(
        out.map((o) => [o.outcome, o.current]),
        [
          ["applied", "UNDER_PROCESSING"],
          ["rejected", "DISPATCHING"],
          ["applied", "PENDING"],
          ["rejected", undefined],
          ["already_advanced", "UNDER_PROCESSING"]
        ]
      )
      const ra = Option.getOrThrow(yield* store.get(a.id))
      assert.strictEqual(ra.status, "UNDER_PROCESSING")
      assert.deepStrictEqual(ra.receipt, { topic: "orders", partition: 2, offset: "9007199254740993" })
      assert.strictEqual(ra.publishedAt, T0 + 4_000)
      assert.strictEqual(ra.updatedAt, T0 + 3_000)
      assert.isNull(ra.leaseOwner)
      const rc = Option.getOrThrow(yield* store.get(c.id))
      assert.strictEqual(rc.attempts, 1)
      assert.strictEqual(rc.availableAt, T0 + 9_000)
      assert.strictEqual(rc.lastError, "broker down")
      assert.isNull(rc.leaseOwner)
      assert.isNull(rc.leaseExpiresAt)
      const rb = Option.getOrThrow(yield* store.get(b.id))
      assert.strictEqual(rb.leaseOwner, "relay-a")
      // lastError: null clears, absent keeps
      yield* store.transition([
        {
          id: c.id,
          from: ["PENDING"],
          to: "DISPATCHING",
          now: T0 + 10_000,
          patch: { lease: { owner: "relay-z", expiresAt: T0 + 20_000 } }
        }
      ])
      const relet = Option.getOrThrow(yield* store.get(c.id))
      assert.strictEqual(relet.leaseOwner, "relay-z")
      assert.strictEqual(relet.leaseExpiresAt, T0 + 20_000)
      assert.strictEqual(relet.lastError, "broker down")
      yield* store.transition([
        { id: c.id, from: ["DISPATCHING"], to: "FAILURE", now: T0 + 11_000, patch: { lastError: null } }
      ])
      assert.isNull(Option.getOrThrow(yield* store.get(c.id)).lastError)
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("a repeated id in one batch is applied in order", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const a = draft()
      yield* store.insert([a])
      yield* store.claim(claimReq())
      const out = yield* store.transition([
        { id: a.id, from: ["DISPATCHING"], to: "PUBLISHED", now: T0 + 1, patch: {} },
        { id: a.id, from: ["PUBLISHED"], to: "UNDER_PROCESSING", now: T0 + 2, patch: {} },
        { id: a.id, from: ["DISPATCHING"], to: "PUBLISHED", now: T0 + 3, patch: {} }
      ])
      assert.deepStrictEqual(
        out.map((o) => o.outcome),
        ["applied", "applied", "rejected"]
      )
      assert.strictEqual(out[2]!.current, "UNDER_PROCESSING")
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("recordTransitions appends the history in the same statement", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const a = draft()
      yield* store.insert([a])
      yield* store.claim(claimReq())
      yield* store.transition([
        { id: a.id, from: ["DISPATCHING"], to: "FAILURE", now: T0 + 5, patch: { lastError: "bad" } }
      ])
      const t = yield* PgTables
      const rows = yield* sql<{
        from_status: string
        to_status: string
      }>`SELECT from_status, to_status FROM ${sql.literal(t.transition)} WHERE event_id = ${a.id}::uuid`
      assert.deepStrictEqual(
        rows.map((r) => [r.from_status, r.to_status]),
        [["DISPATCHING", "FAILURE"]]
      )
    }).pipe(Effect.provide(StoreLive({ recordTransitions: true })))
  )

  it.effect("findStale, list and stats", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const a = draft({ createdAt: T0 - 10 }),
        b = draft({ topic: "users" }),
        c = draft({ status: "PREQUEUED" })
      yield* store.insert([a, b, c])
      const [leased] = yield* store.claim(claimReq({ limit: 1 }))
      // the lease ends 30 s after the database's now() (M9)
      const end = leased!.leaseExpiresAt!
      assert.deepStrictEqual(
        (yield* store.findStale({ now: end, limit: 10 })).rows.map((m) => m.id),
        []
      )
      assert.deepStrictEqual(
        (yield* store.findStale({ now: end + 1, limit: 10 })).rows.map((m) => m.id),
        [a.id]
      )
      assert.deepStrictEqual(
        (yield* store.list({ statuses: ["PENDING", "PREQUEUED"], limit: 10 })).map((m) => m.id),
        [b.id, c.id]
      )
      assert.deepStrictEqual(
        (yield* store.list({ topic: "users", limit: 10 })).map((m) => m.id),
        [b.id]
      )
      assert.deepStrictEqual(
        (yield* store.list({ ids: [c.id, a.id], limit: 10 })).map((m) => m.id),
        [a.id, c.id]
      )
      assert.deepStrictEqual(
        (yield* store.list({ createdBefore: T0, limit: 10 })).map((m) => m.id),
        [a.id]
      )
      assert.deepStrictEqual(
        (yield* store.list({ limit: 1 })).map((m) => m.id),
        [a.id]
      )
      const stats = yield* store.stats(end + 10_000)
      assert.deepStrictEqual(stats.byStatus, { DISPATCHING: 1, PENDING: 1, PREQUEUED: 1 })
      assert.strictEqual(stats.oldestPendingCreatedAt, T0)
      assert.strictEqual(stats.staleLeases, 1)
    }).pipe(Effect.provide(StoreLive()))
  )

  it.effect("purge deletes finished rows older than the cut-off, in bounded batches", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const rows = Array.from({ length: 5 }, () => draft())
      yield* store.insert(rows)
      yield* store.claim(claimReq())
      yield* store.transition(
        rows.map((m, i) => ({
          id: m.id,
          from: ["DISPATCHING"] as const,
          to: i < 4 ? ("PUBLISHED" as const) : ("FAILURE" as const),
          now: T0 + 10 + i,
          patch: {}
        }))
      )
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED"], olderThan: T0 + 13, limit: 2 }), 2)
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED"], olderThan: T0 + 13, limit: 2 }), 1)
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED"], olderThan: T0 + 13, limit: 2 }), 0)
      assert.deepStrictEqual(
        (yield* store.list({ limit: 10 })).map((m) => m.status),
        ["PUBLISHED", "FAILURE"]
      )
    }).pipe(Effect.provide(StoreLive()))
  )
  it.effect("findStale and the recovery lease judge time by the database clock, not the host's (M9)", () =>
    Effect.gen(function* () {
      // it.effect: the Effect clock here says 1970; the database says today.
      const store = yield* OutboxStore
      const wall = Date.now()
      const dead = draft({ key: "a" }),
        live = draft({ key: "b" })
      // The claim writes its lease end with the database clock too: a 1 ms lease is over by the
      // time findStale asks, whatever the host's clock (or the Effect clock) says.
      yield* store.insert([dead])
      yield* store.claim(claimReq({ owner: "dead", now: wall - 60_000, leaseMillis: 1 }))
      yield* store.insert([live])
      yield* store.claim(claimReq({ owner: "live", now: wall, leaseMillis: 600_000 }))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      const page = yield* store.findStale({ limit: 10 })
      assert.deepStrictEqual(
        page.rows.map((m) => m.id),
        [dead.id]
      )
      assert.isTrue(Math.abs(page.now - wall) < 60_000, "the page reports the database clock")
      const lease = yield* store.acquireRecoveryLease({ owner: "r", ttlMillis: 60_000 })
      assert.isTrue(lease.acquired)
      assert.isTrue(Math.abs(lease.expiresAt - (wall + 60_000)) < 30_000, "expiry = database now() + ttl")
    }).pipe(Effect.provide(StoreLive()))
  )

  it.live(
    "a call that gets no answer gives up after callTimeout with a retriable error; the store works after (M6)",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const m = draft({ key: "a" })
        yield* store.insert([m])
        yield* store.claim(claimReq({ owner: "r" }))
        // Another session holds the row: the compare-and-set waits, as on a connection that hangs.
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const blocker = yield* Effect.forkChild(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`SELECT 1 FROM ${sql.literal(t.message)} WHERE id = ${m.id}::uuid FOR UPDATE`
              yield* Deferred.succeed(locked, undefined)
              yield* Deferred.await(release)
            })
          )
        )
        yield* Deferred.await(locked)
        const move = {
          id: m.id,
          from: ["DISPATCHING" as const],
          to: "PENDING" as const,
          leaseOwner: "r",
          patch: {},
          now: T0
        }
        const started = Date.now()
        const error = yield* Effect.flip(store.transition([move]))
        assert.strictEqual(error.operation, "outbox.transition")
        assert.isTrue(error.retriable)
        assert.include(error.reason, "no answer from PostgreSQL within")
        assert.isBelow(Date.now() - started, 10_000)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(blocker)
        const [outcome] = yield* store.transition([move])
        assert.strictEqual(outcome!.outcome, "applied")
      }).pipe(Effect.provide(StoreLive({ callTimeout: Duration.millis(500) }))),
    30_000
  )
})
