/**
 * The conformance suite of the `ParkedStore` port (durable parking): positions per consumer
 * group, keys listed head first with offsets in order, idempotent parking, removal, the bound.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { ParkedStore } from "@effect-outbox/core/ParkedStore"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { uniqueName } from "./internal/conformance.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Fresh services for every test, with the store's bound set to `maxRecords`. */
  readonly layer: (maxRecords: number) => Layer.Layer<ParkedStore, unknown>
  readonly timeout?: number
}

/**
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, ParkedStore>, maxRecords = 1_000) =>
    it.live(title, () => Effect.provide(body, options.layer(maxRecords)), timeout)

  describe(`${name} (ParkedStore conformance)`, () => {
    test(
      "parked keys are listed per group, head first, offsets in numeric order; parking twice parks once",
      Effect.gen(function* () {
        const store = yield* ParkedStore
        const group = uniqueName("group")
        const other = uniqueName("group")
        yield* store.park(group, [
          { topic: "orders", partition: 0, key: "k1", offset: "9" },
          { topic: "orders", partition: 0, key: "k1", offset: "10" },
          { topic: "orders", partition: 1, key: "k2", offset: "3" }
        ])
        yield* store.park(group, [{ topic: "orders", partition: 0, key: "k1", offset: "10" }])
        yield* store.park(other, [{ topic: "orders", partition: 0, key: "k1", offset: "9" }])
        const mine = yield* store.list({ consumer: group })
        assert.deepStrictEqual(mine, [
          { consumer: group, topic: "orders", partition: 0, key: "k1", offsets: ["9", "10"] },
          { consumer: group, topic: "orders", partition: 1, key: "k2", offsets: ["3"] }
        ])
        assert.deepStrictEqual(
          (yield* store.list({ consumer: group, partition: 1 })).map((k) => k.key),
          ["k2"]
        )
        assert.strictEqual((yield* store.list({ consumer: other })).length, 1)
      })
    )

    test(
      "removed positions are forgotten; a key with none left is no longer listed",
      Effect.gen(function* () {
        const store = yield* ParkedStore
        const group = uniqueName("group")
        yield* store.park(group, [
          { topic: "orders", partition: 0, key: "k1", offset: "1" },
          { topic: "orders", partition: 0, key: "k1", offset: "2" }
        ])
        yield* store.remove(group, [{ topic: "orders", partition: 0, offset: "1" }])
        assert.deepStrictEqual((yield* store.list({ consumer: group }))[0]!.offsets, ["2"])
        yield* store.remove(group, [
          { topic: "orders", partition: 0, offset: "2" },
          { topic: "orders", partition: 0, offset: "99" }
        ])
        assert.deepStrictEqual(yield* store.list({ consumer: group }), [])
      })
    )

    test(
      "release requests are kept per group, once per key, until cleared",
      Effect.gen(function* () {
        const store = yield* ParkedStore
        const group = uniqueName("group")
        const target = { consumer: group, topic: "orders", partition: 0, key: "k1" }
        yield* store.requestRelease(target)
        yield* store.requestRelease(target)
        yield* store.requestRelease({ ...target, consumer: uniqueName("group") })
        assert.deepStrictEqual(yield* store.releaseRequests(group), [target])
        yield* store.clearRelease(target)
        assert.deepStrictEqual(yield* store.releaseRequests(group), [])
      })
    )

    test(
      "parking beyond the bound fails with ParkedLimitError and parks nothing of that call",
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
      }),
      2
    )
  })
}
