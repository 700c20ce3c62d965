/**
 * `Transactor` cases: nested transactions and reading one's own writes.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { newMessage, T0 } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const nestedJoinsOuter: Case = {
  name: "a nested transaction joins the outer one: its writes commit or roll back with the outer",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const kept = yield* newMessage()
      const dropped = yield* newMessage()
      yield* transactor.withTransaction(
        transactor.withTransaction(store.insert([kept])).pipe(
          Effect.andThen(
            Effect.gen(function* () {
              // The outer transaction reads the inner one's write.
              assert.isTrue(Option.isSome(yield* store.get(kept.id)))
            })
          )
        )
      )
      assert.isTrue(Option.isSome(yield* store.get(kept.id)))
      yield* Effect.flip(
        transactor.withTransaction(
          Effect.andThen(transactor.withTransaction(store.insert([dropped])), Effect.fail("outer fails"))
        )
      )
      assert.isTrue(Option.isNone(yield* store.get(dropped.id)))
    })
}

export const readsOwnWrites: Case = {
  name: "a transaction reads its own writes",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const message = yield* newMessage()
      yield* transactor.withTransaction(
        Effect.gen(function* () {
          yield* store.insert([message])
          yield* inbox.record({ consumer: "c", identity: "event:own" }, T0)
          assert.strictEqual(Option.getOrThrow(yield* store.get(message.id)).status, "PENDING")
          assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:own" }))
          const claimed = yield* store.claim({ owner: "r", limit: 10, maxPerKey: 10, leaseMillis: 1_000, now: T0 })
          assert.deepStrictEqual(
            claimed.map((row) => row.id),
            [message.id]
          )
        })
      )
      assert.strictEqual(Option.getOrThrow(yield* store.get(message.id)).status, "DISPATCHING")
    })
}
