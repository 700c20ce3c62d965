/**
 * `ParkedStore` case: the bound on parked positions refuses a whole call beyond it.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { ParkedStore } from "@effect-outbox/core/ParkedStore"
import * as Effect from "effect/Effect"
import { uniqueName } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const boundRefusesPark: Case = {
  name: "parking beyond the bound fails with ParkedLimitError and parks nothing of that call",
  run: ({ layer }) =>
    Effect.gen(function* () {
      const store = yield* ParkedStore
      const group = uniqueName("group")
      yield* store.park(group, [
        { topic: "orders", partition: 0, key: "k1", offset: "1" },
        { topic: "orders", partition: 0, key: "k1", offset: "2" }
      ])
      const error = yield* Effect.flip(store.park(group, [{ topic: "orders", partition: 0, key: "k1", offset: "3" }]))
      assert.strictEqual(error._tag, "ParkedLimitError")
      assert.include(error.message, "release")
      assert.deepStrictEqual((yield* store.list({ consumer: group }))[0]!.offsets, ["1", "2"])
    }).pipe(Effect.provide(layer(2)))
}
