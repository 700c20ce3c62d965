/**
 * `OutboxStore` case: a database that cannot be reached (the errors of an outage are
 * the infrastructure's, retriable).
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { StoreError } from "@effect-outbox/core/Errors"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import { newMessages } from "../../conformance.ts"
import { type Case, claimRequest } from "./support.ts"

export const unreachableFailsRetriably: Case = {
  name: "a database that cannot be reached fails each call with a StoreError of kind unavailable",
  unreachable: true,
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const [message] = yield* newMessages([{}])
      const calls: ReadonlyArray<Effect.Effect<unknown, StoreError>> = [
        store.insert([message!]),
        store.claim(claimRequest()),
        store.get(message!.id),
        (yield* Transactor).withTransaction(store.insert([message!]))
      ]
      for (const call of calls) {
        const error = yield* Effect.flip(call)
        assert.strictEqual(error._tag, "StoreError")
        assert.strictEqual(error.kind, "unavailable", error.message)
      }
    })
}
