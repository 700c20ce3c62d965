/**
 * The record-batch size limit the broker enforces per topic (`max.message.bytes`, which falls back
 * to the broker's `message.max.bytes`), cached per topic. The publisher splits each partition's
 * records into batches under it (`PartitionSend`).
 *
 * @since 0.1.0
 */
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Cache from "effect/Cache"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { liveClock } from "./BrokerRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface TopicLimits {
  /** The topic's limit; Kafka's default when the broker cannot say. Never fails. */
  readonly limitFor: (topic: string) => Effect.Effect<number>
  /** Forget a topic's limit (after the broker refused a batch we sized under it). */
  readonly invalidate: (topic: string) => Effect.Effect<void>
}

/**
 * A cache over `read`, which answers the topic's `max.message.bytes`, or `undefined` when the
 * broker could not say (any failure of the client's call should map to `undefined`). A limit read
 * is kept `maxAgeMillis` (default 5 minutes); a default used because the broker did not say, only
 * `fallbackMaxAgeMillis` (default 10 s): the default may be larger than the topic's.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  read: (topic: string) => Effect.Effect<number | undefined>,
  options: { readonly maxAgeMillis?: number; readonly fallbackMaxAgeMillis?: number } = {}
): Effect.Effect<TopicLimits> =>
  Effect.gen(function* () {
    const cache = yield* Cache.makeWith(read, {
      capacity: 10_000,
      timeToLive: (exit) =>
        Exit.isSuccess(exit) && exit.value !== undefined
          ? (options.maxAgeMillis ?? 300_000)
          : (options.fallbackMaxAgeMillis ?? 10_000)
    })
    // Ages are measured on the wall clock: the broker's settings change in real time.
    return {
      limitFor: (topic) =>
        Cache.get(cache, topic).pipe(
          Effect.map((bytes) => bytes ?? RecordSize.DEFAULT_MAX_MESSAGE_BYTES),
          Effect.provideService(Clock.Clock, liveClock)
        ),
      invalidate: (topic) => Cache.invalidate(cache, topic)
    }
  })

/**
 * A config value as a positive integer byte count, else `undefined`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseBytes = (value: string | null | undefined): number | undefined => {
  const bytes = Number(value)
  return Number.isInteger(bytes) && bytes > 0 ? bytes : undefined
}
