/**
 * `ParkedStore` cases: positions per consumer group, keys listed head first with offsets in
 * order, idempotent parking, removal, and release requests.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { ParkedStore } from "@effect-outbox/core/ParkedStore"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { uniqueName } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const parkedListedHeadFirst: Case = {
  name: "parked keys are listed per group, head first, offsets in numeric order; parking twice parks once",
  run: ({ layer }) =>
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
      const mine = (yield* store.list({ consumer: group })).map(({ parkedAt: _, ...key }) => key)
      assert.deepStrictEqual(mine, [
        { consumer: group, topic: "orders", partition: 0, key: "k1", offsets: ["9", "10"] },
        { consumer: group, topic: "orders", partition: 1, key: "k2", offsets: ["3"] }
      ])
      assert.deepStrictEqual(
        (yield* store.list({ consumer: group, partition: 1 })).map((k) => k.key),
        ["k2"]
      )
      assert.strictEqual((yield* store.list({ consumer: other })).length, 1)
    }).pipe(Effect.provide(layer(1_000)))
}

export const removedForgotten: Case = {
  name: "removed positions are forgotten; a key with none left is no longer listed",
  run: ({ layer }) =>
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
    }).pipe(Effect.provide(layer(1_000)))
}

export const releaseRequestsKept: Case = {
  name: "release requests are kept per group, once per key, until cleared",
  run: ({ layer }) =>
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
    }).pipe(Effect.provide(layer(1_000)))
}

export const parkedAtOldest: Case = {
  name: "a key's parkedAt is when its oldest position was parked",
  run: ({ layer }) =>
    Effect.gen(function* () {
      const store = yield* ParkedStore
      const group = uniqueName("group")
      const before = yield* Clock.currentTimeMillis
      yield* store.park(group, [{ topic: "orders", partition: 0, key: "k1", offset: "4" }])
      const first = (yield* store.list({ consumer: group }))[0]!.parkedAt
      assert.isDefined(first)
      assert.isAtLeast(first!, before - 1_000)
      assert.isAtMost(first!, (yield* Clock.currentTimeMillis) + 1_000)
      yield* Effect.sleep("20 millis")
      yield* store.park(group, [{ topic: "orders", partition: 0, key: "k1", offset: "5" }])
      assert.strictEqual((yield* store.list({ consumer: group }))[0]!.parkedAt, first, "the oldest position's time")
    }).pipe(Effect.provide(layer(1_000)))
}
