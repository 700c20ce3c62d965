/**
 * The record-batch size limit the broker enforces per topic (`max.message.bytes`, which falls back
 * to the broker's `message.max.bytes`), cached per topic. Both Kafka publishers split each
 * partition's records into batches under it (`PartitionSend`); each supplies only how
 * its client reads the topic's config.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as RecordSize from "./RecordSize.ts"

/**
 * @since 0.3.0
 * @category models
 */
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

/**
 * A cache over `read`, which answers the topic's `max.message.bytes`, or `undefined` when the
 * broker could not say (any failure of the client's call should map to `undefined`).
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (
  read: (topic: string) => Effect.Effect<number | undefined>,
  options: { readonly maxAgeMillis?: number; readonly fallbackMaxAgeMillis?: number } = {}
): TopicLimits => {
  const maxAge = options.maxAgeMillis ?? 300_000
  // A limit we could not read is retried soon: the default may be larger than the topic's.
  const fallbackAge = options.fallbackMaxAgeMillis ?? 10_000
  const cache = new Map<string, Cached>()
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

/**
 * A config value as a positive integer byte count, else `undefined`.
 *
 * @since 0.3.0
 * @category parsing
 */
export const parseBytes = (value: string | null | undefined): number | undefined => {
  const bytes = Number(value)
  return Number.isInteger(bytes) && bytes > 0 ? bytes : undefined
}
