/**
 * `Transactor` cases: what callers outside a transaction see.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { newMessage, T0 } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const uncommittedInvisible: Case = {
  name: "uncommitted writes are invisible outside the transaction until it commits",
  requires: "isolation",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const message = yield* newMessage()
      const written = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* inbox.record({ consumer: "c", identity: "event:isolated" }, T0)
            yield* Deferred.succeed(written, undefined)
            yield* Deferred.await(commit)
          })
        )
      )
      yield* Deferred.await(written)
      assert.isTrue(Option.isNone(yield* store.get(message.id)))
      assert.isFalse(yield* inbox.exists({ consumer: "c", identity: "event:isolated" }))
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(fiber)
      assert.isTrue(Option.isSome(yield* store.get(message.id)))
      assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:isolated" }))
    })
}

export const writesOutsideApplyAtOnce: Case = {
  name: "writes outside a transaction apply at once",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const message = yield* newMessage()
      yield* store.insert([message])
      const seen = yield* Effect.forkChild(store.get(message.id))
      assert.isTrue(Option.isSome(yield* Fiber.join(seen)))
    })
}
