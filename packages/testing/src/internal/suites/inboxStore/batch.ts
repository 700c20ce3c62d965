/**
 * `InboxStore` cases: `recordBatch`, many keys in one call.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import { T0, uniqueName } from "../../conformance.ts"
import { type Case, key } from "./support.ts"

export const recordBatchInOrder: Case = {
  name: "recordBatch records new keys and reports existing ones as duplicates, in the order given",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const id = uniqueName("b")
      assert.strictEqual(yield* inbox.record(key(`event:${id}-2`), T0), "recorded")
      const keys = [key(`event:${id}-3`), key(`event:${id}-2`), key(`event:${id}-1`), key(`event:${id}-2`, "shipping")]
      const outcomes = yield* inbox.recordBatch(keys, T0)
      assert.deepStrictEqual(outcomes, ["recorded", "duplicate", "recorded", "recorded"])
      const found = yield* Effect.forEach(keys, (k) => inbox.exists(k))
      assert.deepStrictEqual(found, [true, true, true, true])
      assert.deepStrictEqual(yield* inbox.recordBatch(keys, T0 + 1), [
        "duplicate",
        "duplicate",
        "duplicate",
        "duplicate"
      ])
      assert.deepStrictEqual(yield* inbox.recordBatch([], T0), [])
    })
}

export const recordBatchKeyTwice: Case = {
  name: "recordBatch: a key given twice is recorded the first time, a duplicate the second",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const k = key(`event:${uniqueName("twice")}`)
      const other = key(`event:${uniqueName("other")}`)
      assert.deepStrictEqual(yield* inbox.recordBatch([k, other, k], T0), ["recorded", "recorded", "duplicate"])
      assert.isTrue(yield* inbox.exists(k))
    })
}

export const rolledBackRecordBatch: Case = {
  name: "recordBatch inside a rolled-back transaction leaves nothing behind, and sees the transaction's own records",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const a = key(`event:${uniqueName("a")}`)
      const b = key(`event:${uniqueName("b")}`)
      const error = yield* Effect.flip(
        transactor.withTransaction(
          Effect.gen(function* () {
            assert.strictEqual(yield* inbox.record(a, T0), "recorded")
            assert.deepStrictEqual(yield* inbox.recordBatch([a, b], T0), ["duplicate", "recorded"])
            return yield* Effect.fail("work failed" as const)
          })
        )
      )
      assert.strictEqual(error, "work failed")
      assert.isFalse(yield* inbox.exists(a))
      assert.isFalse(yield* inbox.exists(b))
      assert.deepStrictEqual(yield* transactor.withTransaction(inbox.recordBatch([b, a], T0)), ["recorded", "recorded"])
    })
}
