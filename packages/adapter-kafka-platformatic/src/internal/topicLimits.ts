/**
 * The record-batch size limit the broker enforces per topic (`max.message.bytes`), read with
 * `describeConfigs` and cached per topic, as in the kafkajs adapter.
 *
 * @internal
 */
import * as RecordSize from "@effect-outbox/core/RecordSize"
import { type Admin, ConfigResourceTypes } from "@platformatic/kafka"
import * as Effect from "effect/Effect"

export interface TopicLimits {
  /** The topic's limit; Kafka's default when the broker cannot say. Never fails. */
  readonly limitFor: (topic: string) => Effect.Effect<number>
  /** Forget a topic's limit (after the broker refused a batch we sized under it). */
  readonly invalidate: (topic: string) => void
}

interface Cached {
  readonly bytes: number
  readonly until: number
}

export const make = (
  admin: Pick<Admin, "describeConfigs">,
  options: { readonly maxAgeMillis?: number; readonly fallbackMaxAgeMillis?: number } = {}
): TopicLimits => {
  const maxAge = options.maxAgeMillis ?? 300_000
  const fallbackAge = options.fallbackMaxAgeMillis ?? 10_000
  const cache = new Map<string, Cached>()

  const read = (topic: string) =>
    Effect.tryPromise(() =>
      admin.describeConfigs({
        resources: [
          { resourceType: ConfigResourceTypes.TOPIC, resourceName: topic, configurationKeys: ["max.message.bytes"] }
        ]
      })
    ).pipe(
      Effect.map((answer) => {
        const entry = answer[0]?.configs.find((c) => c.name === "max.message.bytes")
        const bytes = Number(entry?.value)
        return Number.isInteger(bytes) && bytes > 0 ? bytes : undefined
      }),
      Effect.orElseSucceed(() => undefined)
    )

  return {
    limitFor: (topic) =>
      Effect.suspend(() => {
        const cached = cache.get(topic)
        if (cached !== undefined && Date.now() < cached.until) return Effect.succeed(cached.bytes)
        return Effect.map(read(topic), (bytes) => {
          cache.set(topic, {
            bytes: bytes ?? RecordSize.DEFAULT_MAX_MESSAGE_BYTES,
            until: Date.now() + (bytes === undefined ? fallbackAge : maxAge)
          })
          return bytes ?? RecordSize.DEFAULT_MAX_MESSAGE_BYTES
        })
      }),
    invalidate: (topic) => {
      cache.delete(topic)
    }
  }
}
