/**
 * `LifecycleRegistry` cases: one driving group per topic, the same group accepted again, another
 * refused with a typed error naming both, release hands over.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import * as Effect from "effect/Effect"
import { uniqueName } from "../../conformance.ts"
import type { Case } from "./support.ts"

export const firstGroupTakesTopic: Case = {
  name: "the first group takes a topic; the same group again is accepted and keeps its registration time",
  run: () =>
    Effect.gen(function* () {
      const registry = yield* LifecycleRegistry
      const topic = uniqueName("topic")
      const first = yield* registry.register(topic, "billing")
      const again = yield* registry.register(topic, "billing")
      assert.strictEqual(again.group, "billing")
      assert.strictEqual(again.registeredAt, first.registeredAt)
      assert.isAtLeast(again.startedAt, first.startedAt)
      const listed = yield* registry.list({ topic })
      assert.deepStrictEqual(
        listed.map((r) => [r.topic, r.group]),
        [[topic, "billing"]]
      )
    })
}

export const otherGroupRefused: Case = {
  name: "another group is refused with LifecycleGroupConflictError naming the topic and the registered group",
  run: () =>
    Effect.gen(function* () {
      const registry = yield* LifecycleRegistry
      const topic = uniqueName("topic")
      yield* registry.register(topic, "billing")
      const error = yield* Effect.flip(registry.register(topic, "shipping"))
      assert.strictEqual(error._tag, "LifecycleGroupConflictError")
      if (error._tag !== "LifecycleGroupConflictError") return
      assert.strictEqual(error.topic, topic)
      assert.strictEqual(error.registered, "billing")
      assert.deepStrictEqual(error.groups, ["billing", "shipping"])
      assert.include(error.message, "lifecycle: false")
      assert.deepStrictEqual(
        (yield* registry.list({ topic })).map((r) => r.group),
        ["billing"]
      )
    })
}

export const releaseHandsOver: Case = {
  name: "release by another group changes nothing; release by the holder lets another group register",
  run: () =>
    Effect.gen(function* () {
      const registry = yield* LifecycleRegistry
      const topic = uniqueName("topic")
      const other = uniqueName("topic")
      yield* registry.register(topic, "billing")
      yield* registry.register(other, "billing")
      assert.isFalse(yield* registry.release(topic, "shipping"))
      assert.isTrue(yield* registry.release(topic, "billing"))
      assert.isFalse(yield* registry.release(topic, "billing"))
      assert.deepStrictEqual(yield* registry.list({ topic }), [])
      const taken = yield* registry.register(topic, "shipping")
      assert.strictEqual(taken.group, "shipping")
      assert.deepStrictEqual(
        (yield* registry.list({ group: "billing" })).filter((r) => r.topic === other).map((r) => r.topic),
        [other]
      )
    })
}
