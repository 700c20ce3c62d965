/**
 * `InboxStore` cases: `record`, one key at a time, and its transaction.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import { T0, uniqueName } from "../../conformance.ts"
import { type Case, key } from "./support.ts"

export const firstRecordThenDuplicate: Case = {
  name: "the first record of a key is recorded, the next is a duplicate",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const k = key(`event:${uniqueName("e")}`)
      assert.isFalse(yield* inbox.exists(k))
      assert.strictEqual(yield* inbox.record(k, T0), "recorded")
      assert.isTrue(yield* inbox.exists(k))
      assert.strictEqual(yield* inbox.record(k, T0 + 1), "duplicate")
    })
}

export const keyIsConsumerAndIdentity: Case = {
  name: "the key is consumer plus identity: another consumer records the same identity",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const identity = "offset:orders/0/42"
      assert.strictEqual(yield* inbox.record(key(identity, "billing"), T0), "recorded")
      assert.strictEqual(yield* inbox.record(key(identity, "shipping"), T0), "recorded")
      assert.strictEqual(yield* inbox.record(key("offset:orders/0/43", "billing"), T0), "recorded")
      assert.isFalse(yield* inbox.exists(key(identity, "audit")))
    })
}

export const rolledBackRecord: Case = {
  name: "a record inside a rolled-back transaction leaves nothing behind",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const k = key("event:rolled-back")
      const error = yield* Effect.flip(
        transactor.withTransaction(
          Effect.gen(function* () {
            assert.strictEqual(yield* inbox.record(k, T0), "recorded")
            return yield* Effect.fail("work failed" as const)
          })
        )
      )
      assert.strictEqual(error, "work failed")
      assert.isFalse(yield* inbox.exists(k))
      assert.strictEqual(yield* inbox.record(k, T0), "recorded")
    })
}

export const duplicateInSameTransaction: Case = {
  name: "a second record of a key in the same transaction is a duplicate, and both commit as one",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const k = key("event:same-tx")
      const outcomes = yield* transactor.withTransaction(Effect.all([inbox.record(k, T0), inbox.record(k, T0)]))
      assert.deepStrictEqual(outcomes, ["recorded", "duplicate"])
      assert.isTrue(yield* inbox.exists(k))
    })
}

export const defectRollsBack: Case = {
  name: "a defect inside the transaction rolls the record back too",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const k = key("event:defect")
      const exit = yield* Effect.exit(
        transactor.withTransaction(Effect.andThen(inbox.record(k, T0), Effect.die(new Error("bug"))))
      )
      assert.isTrue(exit._tag === "Failure")
      assert.isFalse(yield* inbox.exists(k))
    })
}
