/**
 * `Transactor` cases: commit, and rollback on failure, defect and interruption.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { newMessage, T0 } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const commitsTogether: Case = {
  name: "a successful transaction commits the outbox row and the inbox record together and returns its value",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const message = yield* newMessage()
      const value = yield* transactor.withTransaction(
        Effect.gen(function* () {
          yield* store.insert([message])
          yield* inbox.record({ consumer: "c", identity: "event:commit" }, T0)
          return 42
        })
      )
      assert.strictEqual(value, 42)
      assert.isTrue(Option.isSome(yield* store.get(message.id)))
      assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:commit" }))
    })
}

export const failureRollsBack: Case = {
  name: "a failure rolls back every store's writes and propagates the error unchanged",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const message = yield* newMessage()
      const error = yield* Effect.flip(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* inbox.record({ consumer: "c", identity: "event:fail" }, T0)
            return yield* Effect.fail({ _tag: "DomainError", detail: "insufficient funds" } as const)
          })
        )
      )
      assert.deepStrictEqual(error, { _tag: "DomainError", detail: "insufficient funds" })
      assert.isTrue(Option.isNone(yield* store.get(message.id)))
      assert.isFalse(yield* inbox.exists({ consumer: "c", identity: "event:fail" }))
    })
}

export const defectRollsBack: Case = {
  name: "a defect rolls back and surfaces as the same defect",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const message = yield* newMessage()
      const exit = yield* Effect.exit(
        transactor.withTransaction(Effect.andThen(store.insert([message]), Effect.die("a bug")))
      )
      assert.isTrue(Exit.isFailure(exit) && Exit.hasDies(exit))
      assert.isTrue(Option.isNone(yield* store.get(message.id)))
    })
}

export const interruptionRollsBack: Case = {
  name: "an interrupted transaction rolls back",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const message = yield* newMessage()
      const inserted = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* Deferred.succeed(inserted, undefined)
            return yield* Effect.never
          })
        )
      )
      yield* Deferred.await(inserted)
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Option.isNone(yield* store.get(message.id)))
      // The store is usable afterwards: the interrupted transaction released what it held.
      yield* store.insert([message])
      assert.isTrue(Option.isSome(yield* store.get(message.id)))
    })
}
