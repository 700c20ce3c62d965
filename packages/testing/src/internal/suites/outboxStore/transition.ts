/**
 * `OutboxStore` cases: `transition`, the compare-and-set every status change goes through.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BEHIND_ITS_HEAD } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "../../conformance.ts"
import { availableAtOf, type Case, claimRequest, ids, rowOf, statusOf } from "./support.ts"

export const transitionCompareAndSet: Case = {
  name: "transition is a compare-and-set: applied, already_advanced or rejected, in request order",
  run: () =>
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
}

export const transitionChecksLeaseOwner: Case = {
  name: "a transition checks the lease owner, and leaving DISPATCHING clears the lease",
  run: () =>
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
}

export const waitingHeadTakesItsKey: Case = {
  name: "a claimed row sent back to wait sets aside its key's younger due PENDING rows until it has gone, and nothing else",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([
        { key: "a" },
        { key: "a" },
        { key: "a" },
        { key: "b" },
        { key: null },
        // delivered later on purpose: not due yet, so it keeps its time
        { key: "a", availableAt: T0 + 500 }
      ])
      const [a1, a2, a3, b1, loose, aLater] = messages
      yield* store.insert(messages)
      const claimed = yield* store.claim(claimRequest({ owner: "relay-1", maxPerKey: 1 }))
      assert.deepStrictEqual(ids(claimed), [a1!.id, b1!.id, loose!.id])
      // a1 and the key-less row back off until T0 + 100; b1 goes back at once (no wait)
      const backOff = (now: number, relay: string) =>
        store.transition([
          {
            id: a1!.id,
            from: ["DISPATCHING"],
            to: "PENDING",
            leaseOwner: relay,
            patch: { availableAt: now + 99, lease: null },
            now
          }
        ])
      yield* backOff(T0 + 1, "relay-1")
      yield* store.transition([
        {
          id: loose!.id,
          from: ["DISPATCHING"],
          to: "PENDING",
          leaseOwner: "relay-1",
          patch: { availableAt: T0 + 100, lease: null },
          now: T0 + 1
        },
        { id: b1!.id, from: ["DISPATCHING"], to: "PENDING", leaseOwner: "relay-1", patch: { lease: null }, now: T0 + 1 }
      ])
      assert.strictEqual(yield* availableAtOf(a1!.id), T0 + 100)
      assert.strictEqual(yield* availableAtOf(a2!.id), BEHIND_ITS_HEAD)
      assert.strictEqual(yield* availableAtOf(a3!.id), BEHIND_ITS_HEAD)
      assert.strictEqual(yield* availableAtOf(aLater!.id), T0 + 500)
      assert.strictEqual(yield* availableAtOf(b1!.id), T0)
      assert.strictEqual(yield* statusOf(a2!.id), "PENDING")
      // when the wait is over the head goes first, alone
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-1", now: T0 + 50 }))), [b1!.id])
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 100 }))), [
        a1!.id,
        loose!.id
      ])
      // sent back again: the rows set aside stay as they are (not written again)
      const before = yield* rowOf(a2!.id)
      yield* backOff(T0 + 101, "relay-2")
      assert.deepStrictEqual(yield* rowOf(a2!.id), before)
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 150 }))), [])
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 200 }))), [a1!.id])
      yield* store.transition([
        { id: a1!.id, from: ["DISPATCHING"], to: "PUBLISHED", leaseOwner: "relay-2", patch: {}, now: T0 + 201 }
      ])
      // once the head has gone, the rest of its key comes back, in order, at once
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 201 }))), [
        a2!.id,
        a3!.id
      ])
    })
}

export const claimMovesWaitingKeys: Case = {
  name: "a claim sets aside the younger due PENDING rows of a key whose head waits, and brings them back once the head has gone",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([
        { key: "a", availableAt: T0 + 100 },
        { key: "a" },
        { key: "a", availableAt: T0 + 500 },
        { key: "b" }
      ])
      const [a1, a2, aLater, b1] = messages
      yield* store.insert(messages)
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-1" }))), [b1!.id])
      assert.strictEqual(yield* availableAtOf(a2!.id), BEHIND_ITS_HEAD)
      assert.strictEqual(yield* availableAtOf(aLater!.id), T0 + 500, "not due yet: it keeps its time")
      assert.strictEqual(yield* statusOf(a2!.id), "PENDING")
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 100 }))), [a1!.id])
      yield* store.transition([
        { id: a1!.id, from: ["DISPATCHING"], to: "PUBLISHED", leaseOwner: "relay-2", patch: {}, now: T0 + 101 }
      ])
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-2", now: T0 + 101 }))), [a2!.id])
      assert.strictEqual(yield* statusOf(aLater!.id), "PENDING")
    })
}

export const setAsideRowsComeBackWhenHeadFails: Case = {
  name: "the rows set aside behind a waiting head come back when the head fails, and the FAILURE head still blocks them by default",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([
        { key: "a", availableAt: T0 + 100 },
        { key: "a" },
        { key: "c", availableAt: T0 + 100 },
        { key: "c" }
      ])
      const [a1, a2, c1, c2] = messages
      yield* store.insert(messages)
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), [])
      assert.strictEqual(yield* availableAtOf(a2!.id), BEHIND_ITS_HEAD)
      assert.strictEqual(yield* availableAtOf(c2!.id), BEHIND_ITS_HEAD)
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-1", now: T0 + 100 }))), [
        a1!.id,
        c1!.id
      ])
      yield* store.transition([
        { id: a1!.id, from: ["DISPATCHING"], to: "FAILURE", leaseOwner: "relay-1", patch: {}, now: T0 + 101 },
        { id: c1!.id, from: ["DISPATCHING"], to: "FAILURE", leaseOwner: "relay-1", patch: {}, now: T0 + 101 }
      ])
      // A FAILURE head blocks its key by default, and lets it go on under failedHead "skip".
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest({ owner: "relay-1", now: T0 + 101 }))), [])
      assert.strictEqual(yield* availableAtOf(a2!.id), T0, "back, at its creation time")
      assert.deepStrictEqual(
        ids(yield* store.claim(claimRequest({ owner: "relay-1", now: T0 + 102, failedHead: "skip" }))),
        [a2!.id, c2!.id]
      )
    })
}

export const rolledBackTransition: Case = {
  name: "a transition inside a rolled-back transaction is undone",
  run: () =>
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
}
