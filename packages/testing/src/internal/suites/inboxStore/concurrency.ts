/**
 * `InboxStore` cases: two open transactions recording one key.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { T0, uniqueName } from "../../conformance.ts"
import { type Case, key } from "./support.ts"

export const laterSeesDuplicate: Case = {
  name: "of two concurrent transactions recording one key, the later sees a duplicate once the first commits",
  requires: "concurrentTransactions",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const k = key("event:race")
      const recorded = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            const outcome = yield* inbox.record(k, T0)
            yield* Deferred.succeed(recorded, undefined)
            yield* Deferred.await(commit)
            return outcome
          })
        )
      )
      yield* Deferred.await(recorded)
      const second = yield* Effect.forkChild(transactor.withTransaction(inbox.record(k, T0)))
      yield* Effect.sleep("50 millis")
      yield* Deferred.succeed(commit, undefined)
      assert.strictEqual(yield* Fiber.join(first), "recorded")
      assert.strictEqual(yield* Fiber.join(second), "duplicate")
    })
}

export const laterRecordsAfterRollback: Case = {
  name: "of two concurrent transactions recording one key, the later records it when the first rolls back",
  requires: "concurrentTransactions",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const k = key("event:race-rollback")
      const recorded = yield* Deferred.make<void>()
      const abort = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        Effect.flip(
          transactor.withTransaction(
            Effect.gen(function* () {
              yield* inbox.record(k, T0)
              yield* Deferred.succeed(recorded, undefined)
              yield* Deferred.await(abort)
              return yield* Effect.fail("abort" as const)
            })
          )
        )
      )
      yield* Deferred.await(recorded)
      const second = yield* Effect.forkChild(transactor.withTransaction(inbox.record(k, T0)))
      yield* Effect.sleep("50 millis")
      yield* Deferred.succeed(abort, undefined)
      assert.strictEqual(yield* Fiber.join(first), "abort")
      assert.strictEqual(yield* Fiber.join(second), "recorded")
      assert.isTrue(yield* inbox.exists(k))
    })
}

export const recordBatchWaits: Case = {
  name: "recordBatch waits for a concurrent transaction holding one of its keys and sees its outcome",
  requires: "concurrentTransactions",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const transactor = yield* Transactor
      const held = key(`event:${uniqueName("held")}`)
      const free = key(`event:${uniqueName("free")}`)
      const recorded = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* inbox.record(held, T0)
            yield* Deferred.succeed(recorded, undefined)
            yield* Deferred.await(commit)
          })
        )
      )
      yield* Deferred.await(recorded)
      const second = yield* Effect.forkChild(transactor.withTransaction(inbox.recordBatch([free, held], T0)))
      yield* Effect.sleep("50 millis")
      assert.isUndefined(second.pollUnsafe())
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(first)
      assert.deepStrictEqual(yield* Fiber.join(second), ["recorded", "duplicate"])
    })
}
