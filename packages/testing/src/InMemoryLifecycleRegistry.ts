/**
 * `LifecycleRegistry` in memory: one map from topic to its driving group, shared by every runtime
 * built on the same instance (so two runtimes in one test play two processes).
 *
 * @since 0.1.0
 */
import { LifecycleGroupConflictError } from "@effect-outbox/core/Errors"
import { LifecycleRegistry, type Registration } from "@effect-outbox/core/LifecycleRegistry"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (): LifecycleRegistry["Service"] => {
  const rows = new Map<string, Registration>()
  return {
    register: (topic, group) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const held = rows.get(topic)
        if (held !== undefined && held.group !== group) {
          return Effect.fail(
            new LifecycleGroupConflictError({ topic, groups: [held.group, group].sort(), registered: held.group })
          )
        }
        const row = { topic, group, registeredAt: held?.registeredAt ?? now, startedAt: now }
        rows.set(topic, row)
        return Effect.succeed(row)
      }),
    list: (filter = {}) =>
      Effect.sync(() =>
        [...rows.values()]
          .filter((r) => (filter.topic ?? r.topic) === r.topic && (filter.group ?? r.group) === r.group)
          .sort((a, b) => a.topic.localeCompare(b.topic))
      ),
    release: (topic, group) =>
      Effect.sync(() => {
        if (rows.get(topic)?.group !== group) return false
        rows.delete(topic)
        return true
      })
  }
}

/**
 * A fresh registry each time the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<LifecycleRegistry> = Layer.sync(LifecycleRegistry)(make)
