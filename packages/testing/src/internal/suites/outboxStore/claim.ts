/**
 * `OutboxStore` cases: the per-key claim (seq order, one owner per key, blocked and backing-off heads).
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "../../conformance.ts"
import { type Case, claimRequest, ids, statusOf } from "./support.ts"

export const claimLeasesKeyPrefix: Case = {
  name: "claim leases a per-key prefix in seq order and leaves attempts to the caller",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "a" }, { key: "a" }, { key: "b" }])
      yield* store.insert(messages)
      const claimed = yield* store.claim(claimRequest({ owner: "relay-1", leaseMillis: 1_000, maxPerKey: 2 }))
      // a: first two (maxPerKey 2), b: both.
      assert.deepStrictEqual(ids(claimed), [messages[0]!.id, messages[1]!.id, messages[2]!.id, messages[4]!.id])
      // The lease runs leaseMillis from the store's clock: the request's `now` in memory, the
      // database's for PostgreSQL.
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
}

export const claimHonoursLimit: Case = {
  name: "claim honours the limit without breaking a key's prefix",
  run: () =>
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
}

export const dispatchingRowBlocksKey: Case = {
  name: "a key with a DISPATCHING row is blocked for every other claim",
  run: () =>
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
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2" }))), [later[0]!.id, later[2]!.id])
    })
}

export const backingOffHeadBlocksKey: Case = {
  name: "an earlier row backing off (availableAt > now) blocks the later rows of its key",
  run: () =>
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
      // The waiting head goes first; the rest of its key once it has gone.
      const later = yield* store.claim(claimRequest({ now: T0 + 5_000 }))
      assert.deepStrictEqual(ids(later), [messages[0]!.id, messages[3]!.id])
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-b", now: T0 + 6_000 }))), [])
      yield* store.transition([
        {
          id: messages[0]!.id,
          from: ["DISPATCHING"],
          to: "PUBLISHED",
          leaseOwner: "relay-a",
          patch: {},
          now: T0 + 5_001
        }
      ])
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-b", now: T0 + 5_001 }))), [
        messages[1]!.id
      ])
    })
}

export const retriedHeadBeyondOneScan: Case = {
  name: "a key whose retried head is available after more of its younger rows than one scan reads is still claimed",
  run: () =>
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
}

export const nullKeysAndPrequeuedRows: Case = {
  name: "null keys are unordered; PREQUEUED rows, and FAILURE rows under failedHead skip, neither get claimed nor block their key",
  run: () =>
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
}

export const failureHeadBlocksKey: Case = {
  name: "a FAILURE row blocks the younger rows of its key by default, until requeued or SKIPPED; older rows and failedHead skip go on",
  run: () =>
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
}

export const concurrentClaimsOneOwnerPerKey: Case = {
  name: "concurrent claims never hand rows of one key to two owners",
  requires: "concurrentClaims",
  run: () =>
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
}
