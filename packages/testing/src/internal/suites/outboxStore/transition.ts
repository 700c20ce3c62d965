/**
 * `OutboxStore` cases: `transition`, the compare-and-set every status change goes through.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "../../conformance.ts"
import { type Case, claimRequest, ids, statusOf } from "./support.ts"

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
