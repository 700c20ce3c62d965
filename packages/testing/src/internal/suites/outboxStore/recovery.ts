/**
 * `OutboxStore` cases: expired leases found by `findStale`, and the recovery lease.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import { newMessages } from "../../conformance.ts"
import { type Case, claimRequest, ids } from "./support.ts"

export const expiredLeaseFoundStale: Case = {
  name: "an expired lease becomes visible through findStale, oldest lease first",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "c" }])
      yield* store.insert(messages)
      const [first] = yield* store.claim(claimRequest({ owner: "r1", limit: 1, leaseMillis: 2_000 }))
      yield* store.claim(claimRequest({ owner: "r2", limit: 1, leaseMillis: 1_000 }))
      yield* store.claim(claimRequest({ owner: "r3", limit: 1, leaseMillis: 60_000 }))
      // Leases run from the store's clock (the database's for PostgreSQL).
      const t0 = first!.leaseExpiresAt! - 2_000
      assert.deepStrictEqual((yield* store.findStale({ now: t0 + 500, limit: 10 })).rows, [])
      assert.deepStrictEqual(ids((yield* store.findStale({ now: t0 + 1_500, limit: 10 })).rows), [messages[1]!.id])
      assert.deepStrictEqual(ids((yield* store.findStale({ now: t0 + 2_500, limit: 10 })).rows), [
        messages[1]!.id,
        messages[0]!.id
      ])
      assert.deepStrictEqual(ids((yield* store.findStale({ now: t0 + 2_500, limit: 1 })).rows), [messages[1]!.id])
      const stats = yield* store.stats(t0 + 2_500)
      assert.strictEqual(stats.staleLeases, 2)
      assert.strictEqual(stats.byStatus.DISPATCHING, 3)
    })
}

export const findStalePages: Case = {
  name: "findStale pages through expired leases with a cursor, and a page never splits a key's rows",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      // One claim per lease: r1 gets a1, a2 and n1 (expiring first), r2 gets b1 and n2.
      const [a1, n1, a2, b1, n2] = yield* newMessages([
        { key: "a" },
        { key: null },
        { key: "a" },
        { key: "b" },
        { key: null }
      ])
      yield* store.insert([a1!, n1!, a2!])
      const [r1] = yield* store.claim(claimRequest({ owner: "r1", leaseMillis: 1_000 }))
      yield* store.insert([b1!, n2!])
      const [r2] = yield* store.claim(claimRequest({ owner: "r2", leaseMillis: 2_000 }))
      // Leases run from the store's clock (the database's for PostgreSQL): judge past both.
      const now = Math.max(r1!.leaseExpiresAt!, r2!.leaseExpiresAt!) + 5_000
      const first = yield* store.findStale({ now, limit: 1 })
      // The page is a1; a2 comes along (same key), n1 does not.
      assert.deepStrictEqual(ids(first.rows), [a1!.id, a2!.id])
      assert.strictEqual(first.now, now)
      assert.deepStrictEqual(first.next, { leaseExpiresAt: r1!.leaseExpiresAt!, seq: first.rows[0]!.seq })
      const second = yield* store.findStale({ now, limit: 2, after: first.next })
      // The page is n1, a2; a1 comes along again (a2's key), wherever it sorts.
      assert.deepStrictEqual(ids(second.rows), [a1!.id, n1!.id, a2!.id])
      const third = yield* store.findStale({ now, limit: 2, after: second.next })
      assert.deepStrictEqual(ids(third.rows), [b1!.id, n2!.id])
      // A full page says more may follow; the page after the last one is empty and ends it.
      const fourth = yield* store.findStale({ now, limit: 2, after: third.next })
      assert.deepStrictEqual(fourth.rows, [])
      assert.strictEqual(fourth.next, undefined)
      const all = yield* store.findStale({ now, limit: 10 })
      assert.deepStrictEqual(ids(all.rows), [a1!.id, n1!.id, a2!.id, b1!.id, n2!.id])
      assert.strictEqual(all.next, undefined)
    })
}

export const findStaleOnStoreClock: Case = {
  name: "findStale judges expiry by the store's own clock when the caller passes no time",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const [dead, live] = yield* newMessages([{ key: "a" }, { key: "b" }])
      const wall = Date.now()
      yield* store.insert([dead!])
      yield* store.claim(claimRequest({ owner: "dead", now: wall - 60_000, leaseMillis: 1 }))
      yield* store.insert([live!])
      yield* store.claim(claimRequest({ owner: "live", now: wall, leaseMillis: 600_000 }))
      yield* Effect.sleep("50 millis")
      const page = yield* store.findStale({ limit: 10 })
      assert.deepStrictEqual(ids(page.rows), [dead!.id])
      // The clock it reports is the one it judged by: now-ish, past the dead lease.
      assert.isTrue(page.now > wall - 60_000 && Math.abs(page.now - Date.now()) < 60_000)
    })
}

export const recoveryLeaseOneHolder: Case = {
  name: "the recovery lease has one holder at a time; the holder renews it, releases it, or it lapses",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const a = yield* store.acquireRecoveryLease({ owner: "recoverer-a", ttlMillis: 60_000 })
      assert.isTrue(a.acquired)
      const b = yield* store.acquireRecoveryLease({ owner: "recoverer-b", ttlMillis: 60_000 })
      assert.isFalse(b.acquired)
      assert.strictEqual(b.owner, "recoverer-a")
      assert.strictEqual(b.expiresAt, a.expiresAt)
      const renewed = yield* store.acquireRecoveryLease({ owner: "recoverer-a", ttlMillis: 120_000 })
      assert.isTrue(renewed.acquired)
      assert.isTrue(renewed.expiresAt > a.expiresAt)
      // Releasing someone else's lease changes nothing.
      yield* store.releaseRecoveryLease("recoverer-b")
      assert.isFalse((yield* store.acquireRecoveryLease({ owner: "recoverer-b", ttlMillis: 60_000 })).acquired)
      yield* store.releaseRecoveryLease("recoverer-a")
      assert.isTrue((yield* store.acquireRecoveryLease({ owner: "recoverer-b", ttlMillis: 1 })).acquired)
      yield* Effect.sleep("50 millis")
      const taken = yield* store.acquireRecoveryLease({ owner: "recoverer-a", ttlMillis: 60_000 })
      assert.isTrue(taken.acquired)
      assert.strictEqual(taken.owner, "recoverer-a")
    })
}

export const concurrentRecoverers: Case = {
  name: "concurrent recoverers: exactly one acquires the free recovery lease",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const results = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => `recoverer-${i}`),
        (owner) => store.acquireRecoveryLease({ owner, ttlMillis: 60_000 }),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter((r) => r.acquired).length, 1)
      const holder = results.find((r) => r.acquired)!.owner
      assert.isTrue(results.every((r) => r.owner === holder))
    })
}
