/**
 * The record-batch size limit the broker enforces per topic (`max.message.bytes`, which falls back
 * to the broker's `message.max.bytes`), read with `describeConfigs` and cached per topic. The
 * publisher splits each partition's records into batches under it (review C1).
 *
 * @internal
 */
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import Kafkajs from "kafkajs"

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
  admin: Pick<Kafkajs.Admin, "describeConfigs">,
  options: { readonly maxAgeMillis?: number; readonly fallbackMaxAgeMillis?: number } = {}
): TopicLimits => {
  const maxAge = options.maxAgeMillis ?? 300_000
  // A limit we could not read is retried soon: the default may be larger than the topic's.
  const fallbackAge = options.fallbackMaxAgeMillis ?? 10_000
  const cache = new Map<string, Cached>()

  const read = (topic: string) =>
    Effect.tryPromise(() =>
      admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: Kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: ["max.message.bytes"] }]
      })
    ).pipe(
      Effect.map((answer) => {
        const entry = answer.resources[0]?.configEntries.find((e) => e.configName === "max.message.bytes")
        const bytes = Number(entry?.configValue)
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
