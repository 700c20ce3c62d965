/**
 * The conformance suite of the `OutboxStore` port: every adapter (in-memory, PostgreSQL, a third
 * party's) runs these same named behaviours. Each test builds a fresh layer.
 *
 * ```ts
 * import { OutboxStoreSuite } from "@effect-outbox/testing"
 * OutboxStoreSuite.suite("PgOutboxStore", { layer: () => PgOutboxStore.layer.pipe(...) })
 * ```
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import type { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { type ClaimRequest, OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "./internal/conformance.ts"

/**
 * The services a tested adapter provides.
 *
 * @since 0.1.0
 * @category models
 */
export type Services = OutboxStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Uncommitted writes are invisible to other callers (READ COMMITTED or stronger). */
  readonly isolation?: boolean
  /** Several claims may run at once (a store that serialises all calls still passes). */
  readonly concurrentClaims?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** A fresh, empty store for every test. */
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 60 000). */
  readonly timeout?: number
  /**
   * The same store over a database it cannot reach (a closed port, an in-memory database that
   * is down), for the outage case. Without it the case does not run.
   */
  readonly unreachable?: () => Layer.Layer<Services, unknown>
}

const claimRequest = (overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  owner: "relay-a",
  limit: 100,
  maxPerKey: 100,
  leaseMillis: 30_000,
  now: T0,
  ...overrides
})

const ids = (rows: ReadonlyArray<{ readonly id: string }>) => rows.map((row) => row.id)

const statusOf = (id: NewOutboxMessage["id"]) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const row = yield* store.get(id)
    return Option.isSome(row) ? row.value.status : undefined
  })

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { isolation: true, concurrentClaims: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services>) =>
    it.live(title, () => Effect.provide(body, options.layer()), timeout)

  describe(`${name} (OutboxStore conformance)`, () => {
    test(
      "insert stores every field; rows read back in insertion (seq) order",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const payload = new Uint8Array([0, 1, 2, 127, 128, 254, 255])
        const first = yield* newMessage({
          topic: "orders",
          key: "user-1",
          partition: 3,
          headers: { traceparent: "00-abc-def-01" },
          payload,
          availableAt: T0 + 5,
          createdAt: T0 - 10
        })
        const rest = yield* newMessages([{ key: null }, { status: "PREQUEUED" }])
        yield* store.insert([first])
        yield* store.insert(rest)
        const row = Option.getOrThrow(yield* store.get(first.id))
        assert.strictEqual(row.topic, "orders")
        assert.strictEqual(row.key, "user-1")
        assert.strictEqual(row.partition, 3)
        assert.deepStrictEqual(row.headers, first.headers)
        assert.deepStrictEqual([...row.payload], [...payload])
        assert.strictEqual(row.status, "PENDING")
        assert.strictEqual(row.attempts, 0)
        assert.strictEqual(row.availableAt, T0 + 5)
        assert.strictEqual(row.createdAt, T0 - 10)
        assert.strictEqual(row.leaseOwner, null)
        assert.strictEqual(row.leaseExpiresAt, null)
        assert.strictEqual(row.receipt, null)
        assert.strictEqual(row.lastError, null)
        assert.strictEqual(row.publishedAt, null)
        assert.strictEqual(row.processedAt, null)
        const listed = yield* store.list({ limit: 10 })
        assert.deepStrictEqual(ids(listed), [first.id, rest[0]!.id, rest[1]!.id])
        assert.isTrue(listed[0]!.seq < listed[1]!.seq && listed[1]!.seq < listed[2]!.seq)
        assert.strictEqual(listed[1]!.key, null)
        assert.strictEqual(listed[2]!.status, "PREQUEUED")
        assert.isTrue(Option.isNone(yield* store.get((yield* newMessage()).id)))
      })
    )

    test(
      "an insert inside a rolled-back transaction leaves nothing behind",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const transactor = yield* Transactor
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }])
        const error = yield* Effect.flip(
          transactor.withTransaction(Effect.andThen(store.insert(messages), Effect.fail("rolled back" as const)))
        )
        assert.strictEqual(error, "rolled back")
        assert.deepStrictEqual(yield* store.list({ limit: 10 }), [])
        assert.deepStrictEqual(yield* store.claim(claimRequest()), [])
        assert.isTrue(Option.isNone(yield* store.get(messages[0]!.id)))
      })
    )

    if (features.isolation) {
      test(
        "an uncommitted insert is invisible to a claim until its transaction commits",
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const transactor = yield* Transactor
          const message = yield* newMessage()
          const inserted = yield* Deferred.make<void>()
          const commit = yield* Deferred.make<void>()
          const writer = yield* Effect.forkChild(
            transactor.withTransaction(
              Effect.gen(function* () {
                yield* store.insert([message])
                yield* Deferred.succeed(inserted, undefined)
                yield* Deferred.await(commit)
              })
            )
          )
          yield* Deferred.await(inserted)
          assert.deepStrictEqual(yield* store.claim(claimRequest()), [])
          yield* Deferred.succeed(commit, undefined)
          yield* Fiber.join(writer)
          assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), [message.id])
        })
      )
    }

    test(
      "claim leases a per-key prefix in seq order and leaves attempts to the caller",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "a" }, { key: "a" }, { key: "b" }])
        yield* store.insert(messages)
        const claimed = yield* store.claim(claimRequest({ owner: "relay-1", leaseMillis: 1_000, maxPerKey: 2 }))
        // a: first two (maxPerKey 2), b: both.
        assert.deepStrictEqual(ids(claimed), [messages[0]!.id, messages[1]!.id, messages[2]!.id, messages[4]!.id])
        // The lease runs leaseMillis from the store's clock: the request's `now` in memory, the
        // database's for PostgreSQL (M9).
        const leaseStart = claimed[0]!.leaseExpiresAt! - 1_000
        assert.isTrue(leaseStart === T0 || Math.abs(leaseStart - Date.now()) < 60_000, `lease from ${leaseStart}`)
        for (const row of claimed) {
          assert.strictEqual(row.status, "DISPATCHING")
          assert.strictEqual(row.leaseOwner, "relay-1")
          assert.strictEqual(row.leaseExpiresAt, leaseStart + 1_000)
          assert.strictEqual(row.attempts, 0)
        }
        assert.strictEqual(yield* statusOf(messages[3]!.id), "PENDING")
        const stored = Option.getOrThrow(yield* store.get(messages[0]!.id))
        assert.strictEqual(stored.status, "DISPATCHING")
        assert.strictEqual(stored.leaseOwner, "relay-1")
      })
    )

    test(
      "claim honours the limit without breaking a key's prefix",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "a" }, { key: "b" }, { key: "a" }])
        yield* store.insert(messages)
        const first = yield* store.claim(claimRequest({ limit: 2 }))
        assert.deepStrictEqual(ids(first), [messages[0]!.id, messages[1]!.id])
        // a is in flight: nothing more of a, but b is free.
        const second = yield* store.claim(claimRequest({ owner: "relay-b" }))
        assert.deepStrictEqual(ids(second), [messages[2]!.id])
      })
    )

    test(
      "a key with a DISPATCHING row is blocked for every other claim",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const [a1] = yield* newMessages([{ key: "a" }])
        yield* store.insert([a1!])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-1" }))), [a1!.id])
        const later = yield* newMessages([{ key: "a" }, { key: "c" }, { key: "a" }])
        yield* store.insert(later)
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2" }))), [later[1]!.id])
        // Once a1 is published, the rest of a is claimable, in order.
        const [outcome] = yield* store.transition([
          {
            id: a1!.id,
            from: ["DISPATCHING"],
            to: "PUBLISHED",
            leaseOwner: "relay-1",
            patch: { publishedAt: T0 + 1 },
            now: T0 + 1
          }
        ])
        assert.strictEqual(outcome!.outcome, "applied")
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2" }))), [
          later[0]!.id,
          later[2]!.id
        ])
      })
    )

    test(
      "an earlier row backing off (availableAt > now) blocks the later rows of its key",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([
          { key: "a", availableAt: T0 + 5_000 },
          { key: "a" },
          { key: "b" },
          { key: null, availableAt: T0 + 5_000 },
          { key: null }
        ])
        yield* store.insert(messages)
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), [messages[2]!.id, messages[4]!.id])
        const later = yield* store.claim(claimRequest({ now: T0 + 5_000 }))
        assert.deepStrictEqual(ids(later), [messages[0]!.id, messages[1]!.id, messages[3]!.id])
      })
    )

    test(
      "a key whose retried head is available after more of its younger rows than one scan reads is still claimed",
      Effect.gen(function* () {
        // After a broker outage: each key's head was retried (availableAt pushed out), while the
        // rows enqueued during the outage became available before it, and there are more of them
        // than a claim reads in one scan (limit * 20 + 1000 for the PostgreSQL store).
        const store = yield* OutboxStore
        const head = yield* newMessage({ key: "a", availableAt: T0 + 100 })
        const younger = yield* newMessages(Array.from({ length: 1_100 }, () => ({ key: "a" })))
        yield* store.insert([head, ...younger])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ limit: 1 }))), [])
        const claimed = yield* store.claim(claimRequest({ limit: 1, maxPerKey: 3, now: T0 + 100 }))
        assert.deepStrictEqual(ids(claimed), [head.id])
        const more = yield* store.claim(claimRequest({ owner: "relay-b", limit: 5, now: T0 + 100 }))
        assert.deepStrictEqual(ids(more), [], "nothing more of the key while its head is in flight")
      })
    )

    test(
      "null keys are unordered; PREQUEUED rows, and FAILURE rows under failedHead skip, neither get claimed nor block their key",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([
          { key: null },
          { key: "a", status: "PREQUEUED" },
          { key: "a" },
          { key: "f" },
          { key: null }
        ])
        yield* store.insert(messages)
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ limit: 1 }))), [messages[0]!.id])
        // The first null-key row is in flight; the second is claimable anyway.
        const second = yield* store.claim(claimRequest({ owner: "relay-b" }))
        assert.deepStrictEqual(ids(second), [messages[2]!.id, messages[3]!.id, messages[4]!.id])
        yield* store.transition([{ id: messages[3]!.id, from: ["DISPATCHING"], to: "FAILURE", patch: {}, now: T0 }])
        const f2 = yield* newMessage({ key: "f" })
        yield* store.insert([f2])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ failedHead: "skip" }))), [f2.id])
        assert.strictEqual(yield* statusOf(messages[1]!.id), "PREQUEUED")
      })
    )

    test(
      "a FAILURE row blocks the younger rows of its key by default, until requeued or SKIPPED; older rows and failedHead skip go on",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        // a, c, d: the head fails. b: published.
        const m = yield* newMessages([
          { key: "a" },
          { key: "a" },
          { key: "c" },
          { key: "c" },
          { key: "d" },
          { key: "d" },
          { key: "b" }
        ])
        const [a1, a2, c1, c2, d1, d2, b1] = m
        yield* store.insert(m)
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ maxPerKey: 1 }))), ids([a1!, c1!, d1!, b1!]))
        yield* store.transition([
          ...[a1!, c1!, d1!].map((row) => ({
            id: row.id,
            from: ["DISPATCHING"] as const,
            to: "FAILURE" as const,
            patch: { attempts: 10, lastError: "gave up" },
            now: T0
          })),
          { id: b1!.id, from: ["DISPATCHING"], to: "PUBLISHED", patch: {}, now: T0 }
        ])
        const a3 = yield* newMessage({ key: "a" })
        yield* store.insert([a3])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), [], "every key waits behind its FAILURE head")
        const stats = yield* store.stats(T0)
        if (stats.blockedKeys !== undefined) assert.strictEqual(stats.blockedKeys, 3)
        // Skipped: the key goes on without it, in order.
        yield* store.transition([{ id: a1!.id, from: ["FAILURE"], to: "SKIPPED", patch: {}, now: T0 }])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), ids([a2!, a3]))
        // Requeued: the head itself comes first.
        yield* store.transition([{ id: c1!.id, from: ["FAILURE"], to: "PENDING", patch: { attempts: 0 }, now: T0 }])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), ids([c1!, c2!]))
        // The old rule, explicitly: d's younger row overtakes its FAILURE head.
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ failedHead: "skip" }))), ids([d2!]))
        assert.strictEqual(yield* statusOf(d1!.id), "FAILURE")
        // Only younger rows wait: a row older than its key's FAILURE row is still claimed.
        const [e1, e2] = yield* newMessages([{ key: "e" }, { key: "e" }])
        yield* store.insert([e1!, e2!])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), ids([e1!, e2!]))
        yield* store.transition([
          { id: e1!.id, from: ["DISPATCHING"], to: "PENDING", patch: { lease: null }, now: T0 },
          { id: e2!.id, from: ["DISPATCHING"], to: "FAILURE", patch: { lease: null }, now: T0 }
        ])
        const e3 = yield* newMessage({ key: "e" })
        yield* store.insert([e3])
        assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), ids([e1!]))
      })
    )

    if (features.concurrentClaims) {
      test(
        "concurrent claims never hand rows of one key to two owners",
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const fields = Array.from({ length: 60 }, (_, i) => ({ key: `key-${i % 6}` }))
          const messages = yield* newMessages(fields)
          yield* store.insert(messages)
          const owners = Array.from({ length: 8 }, (_, i) => `relay-${i}`)
          const batches = yield* Effect.forEach(
            owners,
            (owner) => store.claim(claimRequest({ owner, limit: 7, maxPerKey: 3 })),
            { concurrency: "unbounded" }
          )
          const ownerOfKey = new Map<string, string>()
          const seen = new Set<string>()
          for (const [i, batch] of batches.entries()) {
            for (const row of batch) {
              assert.isFalse(seen.has(row.id), `row ${row.id} claimed twice`)
              seen.add(row.id)
              const previous = ownerOfKey.get(row.key!)
              assert.isTrue(previous === undefined || previous === owners[i], `key ${row.key} given to two owners`)
              ownerOfKey.set(row.key!, owners[i]!)
              assert.strictEqual(row.leaseOwner, owners[i])
            }
          }
          // Each key's claimed rows are exactly the first rows of that key.
          for (const [key] of ownerOfKey) {
            const ofKey = messages.filter((m) => m.key === key).map((m) => m.id)
            const claimedOfKey = ofKey.filter((id) => seen.has(id))
            assert.deepStrictEqual(claimedOfKey, ofKey.slice(0, claimedOfKey.length))
            assert.isTrue(claimedOfKey.length <= 3)
          }
          assert.isTrue(seen.size > 0)
        })
      )
    }

    test(
      "an expired lease becomes visible through findStale, oldest lease first",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "c" }])
        yield* store.insert(messages)
        const [first] = yield* store.claim(claimRequest({ owner: "r1", limit: 1, leaseMillis: 2_000 }))
        yield* store.claim(claimRequest({ owner: "r2", limit: 1, leaseMillis: 1_000 }))
        yield* store.claim(claimRequest({ owner: "r3", limit: 1, leaseMillis: 60_000 }))
        // Leases run from the store's clock (the database's for PostgreSQL, M9).
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
    )

    test(
      "findStale pages through expired leases with a cursor, and a page never splits a key's rows",
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
        // Leases run from the store's clock (the database's for PostgreSQL, M9): judge past both.
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
    )

    test(
      "findStale judges expiry by the store's own clock when the caller passes no time",
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
    )

    test(
      "the recovery lease has one holder at a time; the holder renews it, releases it, or it lapses",
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
    )

    test(
      "concurrent recoverers: exactly one acquires the free recovery lease",
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
    )

    test(
      "transition is a compare-and-set: applied, already_advanced or rejected, in request order",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "c" }])
        const [m1, m2, m3] = messages
        yield* store.insert(messages)
        yield* store.claim(claimRequest({ owner: "relay-1" }))
        // m2 ran ahead: the consumer already processed it.
        yield* store.transition([
          { id: m2!.id, from: ["DISPATCHING", "PUBLISHED"], to: "UNDER_PROCESSING", patch: {}, now: T0 + 1 },
          { id: m2!.id, from: ["UNDER_PROCESSING"], to: "SUCCESS", patch: { processedAt: T0 + 2 }, now: T0 + 2 }
        ])
        const receipt = (partition: number, offset: string) => ({ topic: "conformance", partition, offset })
        const missing = (yield* newMessage()).id
        const outcomes = yield* store.transition([
          {
            id: m1!.id,
            from: ["DISPATCHING"],
            to: "PUBLISHED",
            acceptIfIn: ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"],
            patch: { receipt: receipt(0, "10"), publishedAt: T0 + 3, attempts: 1, lastError: null },
            now: T0 + 3
          },
          {
            id: m2!.id,
            from: ["DISPATCHING"],
            to: "PUBLISHED",
            acceptIfIn: ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"],
            patch: { receipt: receipt(1, "11"), publishedAt: T0 + 3 },
            now: T0 + 3
          },
          { id: m3!.id, from: ["PENDING"], to: "DISPATCHING", patch: {}, now: T0 + 3 },
          { id: missing, from: ["DISPATCHING"], to: "PUBLISHED", patch: {}, now: T0 + 3 }
        ])
        assert.deepStrictEqual(outcomes, [
          { id: m1!.id, outcome: "applied", current: "PUBLISHED" },
          { id: m2!.id, outcome: "already_advanced", current: "SUCCESS" },
          { id: m3!.id, outcome: "rejected", current: "DISPATCHING" },
          { id: missing, outcome: "rejected", current: undefined }
        ])
        const row1 = Option.getOrThrow(yield* store.get(m1!.id))
        assert.deepStrictEqual(row1.receipt, receipt(0, "10"))
        assert.strictEqual(row1.publishedAt, T0 + 3)
        assert.strictEqual(row1.attempts, 1)
        const row2 = Option.getOrThrow(yield* store.get(m2!.id))
        assert.strictEqual(row2.status, "SUCCESS")
        assert.deepStrictEqual(row2.receipt, receipt(1, "11"))
        assert.strictEqual(row2.publishedAt, T0 + 3)
        assert.strictEqual(row2.processedAt, T0 + 2)
      })
    )

    test(
      "a transition checks the lease owner, and leaving DISPATCHING clears the lease",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }])
        const [m1, m2] = messages
        yield* store.insert(messages)
        yield* store.claim(claimRequest({ owner: "relay-1", leaseMillis: 1_000 }))
        const [stolen] = yield* store.transition([
          {
            id: m1!.id,
            from: ["DISPATCHING"],
            to: "PENDING",
            leaseOwner: "relay-2",
            patch: {},
            now: T0 + 1
          }
        ])
        assert.deepStrictEqual(stolen, { id: m1!.id, outcome: "rejected", current: "DISPATCHING" })
        // Re-leasing keeps DISPATCHING with a new owner and expiry.
        const [released, released2] = yield* store.transition([
          {
            id: m1!.id,
            from: ["DISPATCHING"],
            to: "PENDING",
            leaseOwner: "relay-1",
            patch: { attempts: 1, availableAt: T0 + 100, lastError: "broker timeout" },
            now: T0 + 2
          },
          {
            id: m2!.id,
            from: ["DISPATCHING"],
            to: "DISPATCHING",
            leaseOwner: "relay-1",
            patch: { lease: { owner: "relay-3", expiresAt: T0 + 9_000 } },
            now: T0 + 2
          }
        ])
        assert.strictEqual(released!.outcome, "applied")
        assert.strictEqual(released2!.outcome, "applied")
        const row1 = Option.getOrThrow(yield* store.get(m1!.id))
        assert.strictEqual(row1.status, "PENDING")
        assert.strictEqual(row1.leaseOwner, null)
        assert.strictEqual(row1.leaseExpiresAt, null)
        assert.strictEqual(row1.attempts, 1)
        assert.strictEqual(row1.availableAt, T0 + 100)
        assert.strictEqual(row1.lastError, "broker timeout")
        const row2 = Option.getOrThrow(yield* store.get(m2!.id))
        assert.strictEqual(row2.leaseOwner, "relay-3")
        assert.strictEqual(row2.leaseExpiresAt, T0 + 9_000)
        assert.deepStrictEqual(ids((yield* store.findStale({ now: T0 + 5_000, limit: 10 })).rows), [])
        assert.deepStrictEqual(ids((yield* store.findStale({ now: T0 + 10_000, limit: 10 })).rows), [m2!.id])
      })
    )

    test(
      "a transition inside a rolled-back transaction is undone",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const transactor = yield* Transactor
        const message = yield* newMessage({ status: "PREQUEUED" })
        yield* store.insert([message])
        yield* Effect.flip(
          transactor.withTransaction(
            Effect.gen(function* () {
              const [outcome] = yield* store.transition([
                { id: message.id, from: ["PREQUEUED"], to: "PENDING", patch: {}, now: T0 }
              ])
              assert.strictEqual(outcome!.outcome, "applied")
              assert.strictEqual(yield* statusOf(message.id), "PENDING")
              return yield* Effect.fail("abort")
            })
          )
        )
        assert.strictEqual(yield* statusOf(message.id), "PREQUEUED")
      })
    )

    test(
      "list filters by status, topic, ids and creation time, in seq order, up to the limit",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([
          { topic: "x", createdAt: T0 - 300 },
          { topic: "y", createdAt: T0 - 200 },
          { topic: "x", createdAt: T0 - 100, status: "PREQUEUED" },
          { topic: "x", createdAt: T0 }
        ])
        yield* store.insert(messages)
        const all = messages.map((m) => m.id)
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, topic: "x" })), [all[0], all[2], all[3]])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, statuses: ["PREQUEUED"] })), [all[2]])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, createdBefore: T0 - 150 })), [all[0], all[1]])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, ids: [all[3]!, all[1]!] })), [all[1], all[3]])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 2 })), [all[0], all[1]])
      })
    )

    test(
      "list filters by last update: the rows stuck in a status since before a time",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "c" }])
        yield* store.insert(messages)
        yield* store.claim(claimRequest())
        const start = (m: NewOutboxMessage, now: number) =>
          store.transition([{ id: m.id, from: ["DISPATCHING"], to: "UNDER_PROCESSING", patch: {}, now }])
        yield* start(messages[0]!, T0 + 10)
        yield* start(messages[1]!, T0 + 500)
        // messages[2] stays DISPATCHING (claimed at T0).
        const stuck = yield* store.list({ limit: 10, statuses: ["UNDER_PROCESSING"], updatedBefore: T0 + 100 })
        assert.deepStrictEqual(ids(stuck), [messages[0]!.id])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 + 100 })), [
          messages[0]!.id,
          messages[2]!.id
        ])
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 })), [])
        // Paging in seq order.
        const [first] = yield* store.list({ limit: 1, updatedBefore: T0 + 100 })
        assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 + 100, afterSeq: first!.seq })), [
          messages[2]!.id
        ])
      })
    )

    test(
      "stats count rows by status and report the oldest pending creation time",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const empty = yield* store.stats(T0)
        assert.strictEqual(empty.oldestPendingCreatedAt, null)
        assert.strictEqual(empty.staleLeases, 0)
        const messages = yield* newMessages([
          { key: "a", createdAt: T0 - 50 },
          { key: "b", createdAt: T0 - 70 },
          { key: "c", createdAt: T0 - 10, status: "PREQUEUED" }
        ])
        yield* store.insert(messages)
        yield* store.claim(claimRequest({ limit: 1 }))
        const stats = yield* store.stats(T0)
        assert.strictEqual(stats.byStatus.PENDING, 1)
        assert.strictEqual(stats.byStatus.DISPATCHING, 1)
        assert.strictEqual(stats.byStatus.PREQUEUED, 1)
        assert.strictEqual(stats.byStatus.SUCCESS ?? 0, 0)
        assert.strictEqual(stats.oldestPendingCreatedAt, T0 - 70)
      })
    )

    if (features.isolation) {
      test(
        "purge neither waits for nor deletes a row another open transaction is changing",
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const transactor = yield* Transactor
          const messages = yield* newMessages([{ key: "a" }, { key: "b" }])
          yield* store.insert(messages)
          yield* store.claim(claimRequest())
          for (const m of messages) {
            yield* store.transition([{ id: m.id, from: ["DISPATCHING"], to: "PUBLISHED", patch: {}, now: T0 + 10 }])
          }
          const locked = yield* Deferred.make<void>()
          const finish = yield* Deferred.make<void>()
          const consumer = yield* Effect.forkChild(
            transactor.withTransaction(
              Effect.gen(function* () {
                yield* store.transition([
                  {
                    id: messages[0]!.id,
                    from: ["PUBLISHED"],
                    to: "UNDER_PROCESSING",
                    patch: {},
                    now: T0 + 20
                  }
                ])
                yield* Deferred.succeed(locked, undefined)
                yield* Deferred.await(finish)
              })
            )
          )
          yield* Deferred.await(locked)
          const purged = yield* store
            .purge({ statuses: ["PUBLISHED"], olderThan: T0 + 100, limit: 10 })
            .pipe(Effect.timeout("10 seconds"))
          assert.strictEqual(purged, 1)
          yield* Deferred.succeed(finish, undefined)
          yield* Fiber.join(consumer)
          const left = yield* store.list({ limit: 10 })
          assert.deepStrictEqual(
            left.map((row) => [row.id, row.status]),
            [[messages[0]!.id, "UNDER_PROCESSING"]]
          )
        })
      )
    }

    test(
      "purge deletes at most `limit` finished rows last updated before the cut-off",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const messages = yield* newMessages(Array.from({ length: 5 }, (_, i) => ({ key: `k${i}` })))
        yield* store.insert(messages)
        yield* store.claim(claimRequest())
        const finish = (m: NewOutboxMessage, to: OutboxStatus, now: number) =>
          store.transition([{ id: m.id, from: ["DISPATCHING"], to, patch: {}, now }])
        yield* finish(messages[0]!, "PUBLISHED", T0 + 10)
        yield* finish(messages[1]!, "PUBLISHED", T0 + 20)
        yield* finish(messages[2]!, "FAILURE", T0 + 30)
        yield* finish(messages[3]!, "PUBLISHED", T0 + 500)
        // messages[4] stays DISPATCHING.
        assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 2)
        assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 1)
        assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 0)
        const left: ReadonlyArray<OutboxMessage> = yield* store.list({ limit: 10 })
        assert.deepStrictEqual(ids(left), [messages[3]!.id, messages[4]!.id])
      })
    )

    test(
      "retention purges a backlog larger than one batch in one round, batch after batch (M1)",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const backlog = 1_250
        const messages = yield* newMessages(Array.from({ length: backlog + 1 }, (_, i) => ({ key: `k${i}` })))
        yield* store.insert(messages)
        yield* store.claim(claimRequest({ limit: backlog + 1 }))
        yield* store.transition(
          messages.slice(0, backlog).map((m) => ({
            id: m.id,
            from: ["DISPATCHING"] as const,
            to: "PUBLISHED" as const,
            patch: {},
            now: T0 + 10
          }))
        )
        const purged = yield* Retention.runOnce({ olderThan: Duration.zero, batchSize: 100, maxBatchesPerRound: 100 })
        assert.strictEqual(purged, backlog)
        const left = yield* store.list({ limit: 10 })
        assert.deepStrictEqual(ids(left), [messages[backlog]!.id], "only the DISPATCHING row is left")
      })
    )
    // issue #18: the errors of an outage are the infrastructure's, retriable (H2).
    const unreachable = options.unreachable
    if (unreachable !== undefined) {
      it.live(
        "a database that cannot be reached fails each call with a retriable OutboxStoreError",
        () =>
          Effect.gen(function* () {
            const store = yield* OutboxStore
            const [message] = yield* newMessages([{}])
            const calls: ReadonlyArray<Effect.Effect<unknown, OutboxStoreError>> = [
              store.insert([message!]),
              store.claim(claimRequest()),
              store.get(message!.id),
              (yield* Transactor).withTransaction(store.insert([message!]))
            ]
            for (const call of calls) {
              const error = yield* Effect.flip(call)
              assert.strictEqual(error._tag, "OutboxStoreError")
              assert.isTrue(error.retriable, error.message)
            }
          }).pipe(Effect.provide(unreachable())),
        timeout
      )
    }
  })
}
