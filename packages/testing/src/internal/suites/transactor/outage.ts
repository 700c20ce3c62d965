/**
 * `Transactor` case: the server ends a transaction's connection.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { StoreError } from "@effect-outbox/core/Errors"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { newMessages } from "../../conformance.ts"
import type { Case, Services } from "./support.ts"

/** The case over the adapter's `terminateConnection` (it may need the layer's extra services `R`). */
export const connectionEnded = <R>(terminate: Effect.Effect<unknown, unknown, Services | R>): Case<R> => ({
  name: "a transaction whose connection the server ends fails with a StoreError of kind unavailable and commits nothing",
  run: () =>
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* OutboxStore
      const [first, second] = yield* newMessages([{}, {}])
      const error = yield* Effect.flip(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([first!])
            yield* Effect.ignore(terminate)
            yield* store.insert([second!])
          })
        )
      )
      assert.strictEqual((error as { readonly _tag?: unknown })._tag, "StoreError", String(error))
      // The database's trouble, not the request's: the consumer waits and retries, never
      // dead-letters on it.
      assert.strictEqual((error as StoreError).kind, "unavailable", (error as StoreError).message)
      assert.isTrue(Option.isNone(yield* store.get(first!.id)))
      assert.isTrue(Option.isNone(yield* store.get(second!.id)))
      // A new transaction gets a new connection.
      yield* transactor.withTransaction(store.insert([first!]))
      assert.isTrue(Option.isSome(yield* store.get(first!.id)))
    })
})
