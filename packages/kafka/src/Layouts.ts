/**
 * The publisher's view of topic layouts: partition metadata cached for `maxAge`, re-read when a
 * request names a partition the cache lacks, and where each request goes (its explicit partition,
 * the Java client's murmur2 partition of its key, or round robin). The partition is decided
 * before sending, so every record's partition is known to the caller and to the receipts.
 *
 * One partition without a leader must not stop the others. Kafka answers metadata for such a
 * topic with a partition error, and some clients (kafkajs) then fail the whole read: when a read
 * fails with an outage, the last good layout is used (`stale`, re-read every second), and the
 * partitions whose sends came back unavailable since the last clean read wait (their records are
 * refused as unavailable without being sent) while the others are sent.
 *
 * @since 0.1.0
 */
import {
  BrokerUnavailableError,
  PermanentPublishError,
  type PublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Cache from "effect/Cache"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { liveClock } from "./BrokerRetry.ts"
import type { KafkaDriver, TopicLayout } from "./KafkaDriver.ts"

/**
 * Where one request goes, or why it cannot go anywhere.
 *
 * @since 0.1.0
 * @category models
 */
export type Target =
  | { readonly _tag: "Send"; readonly topic: string; readonly partition: number; readonly leader: number }
  | { readonly _tag: "Reject"; readonly error: PublishError }

/**
 * @since 0.1.0
 * @category models
 */
export interface Layouts {
  /** Fresh metadata; `undefined` when the topic does not exist. Fails with the client's error. */
  readonly fetch: (topic: string) => Effect.Effect<TopicLayout | undefined, unknown>
  /** Cached layout unless stale, or unless some request targets a partition it lacks. */
  readonly layoutFor: (
    topic: string,
    requests: ReadonlyArray<PublishRequest>
  ) => Effect.Effect<TopicLayout | undefined, unknown>
  readonly target: (request: PublishRequest, layout: TopicLayout | undefined) => Target
  /** A send to `partition` came back unavailable: while the layout is stale, its records wait. */
  readonly noteUnavailable: (topic: string, partition: number) => void
}

/** How often a stale layout, or one with a leaderless partition, is read again. */
const degradedMaxAgeMillis = 1_000

/**
 * Layouts read through `driver.metadata`. `onGrown` runs when a topic shows more partitions than
 * before (a producer's own metadata may predate the growth).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: KafkaDriver, maxAgeMillis: number, onGrown: () => void): Effect.Effect<Layouts> =>
  Effect.gen(function* () {
    const counts = new Map<string, number>()
    const roundRobin = new Map<string, number>()
    const lastGood = new Map<string, TopicLayout>()
    // Per topic: partitions whose sends came back unavailable since the last clean read.
    const suspects = new Map<string, Set<number>>()
    const read = (topic: string) =>
      Effect.tryPromise({ try: () => driver.metadata(topic), catch: (error) => error }).pipe(
        Effect.catchIf(driver.protocol.isUnknownTopic, () => Effect.succeed(undefined)),
        Effect.tap((layout) =>
          Effect.sync(() => {
            if (layout === undefined) lastGood.delete(topic)
            else lastGood.set(topic, layout)
            if (layout === undefined || (layout.leaderless ?? []).length === 0) suspects.delete(topic)
          })
        ),
        // An outage with a layout known: keep sending where the last good answer says.
        Effect.catchIf(
          (error) => driver.protocol.isBrokerUnavailable(error) && lastGood.has(topic),
          () => Effect.succeed<TopicLayout | undefined>({ ...lastGood.get(topic)!, stale: true })
        ),
        Effect.tap((layout) =>
          Effect.sync(() => {
            const previous = counts.get(topic)
            if (layout !== undefined && previous !== undefined && previous < layout.partitions) onGrown()
            if (layout === undefined) counts.delete(topic)
            else counts.set(topic, layout.partitions)
          })
        )
      )
    // A failed read, or a topic that does not exist, is not kept: the next publish asks again.
    // Ages are measured on the wall clock.
    const cache = yield* Cache.makeWith(read, {
      capacity: 10_000,
      timeToLive: (exit) =>
        Exit.isSuccess(exit) && exit.value !== undefined
          ? exit.value.stale === true || (exit.value.leaderless ?? []).length > 0
            ? Math.min(maxAgeMillis, degradedMaxAgeMillis)
            : maxAgeMillis
          : 0
    })
    const live = <A, E>(effect: Effect.Effect<A, E>) => Effect.provideService(effect, Clock.Clock, liveClock)

    const fetch = (topic: string) => live(Cache.refresh(cache, topic))

    const layoutFor = (topic: string, requests: ReadonlyArray<PublishRequest>) =>
      Effect.gen(function* () {
        const wanted = requests.reduce(
          (max, r) => (r.topic === topic && r.partition !== null ? Math.max(max, r.partition) : max),
          -1
        )
        const cached = yield* live(Cache.getOption(cache, topic))
        return Option.isSome(cached) && cached.value !== undefined && wanted < cached.value.partitions
          ? cached.value
          : yield* fetch(topic)
      })

    const target = (request: PublishRequest, layout: TopicLayout | undefined): Target => {
      if (layout === undefined) {
        return {
          _tag: "Reject",
          error: new PermanentPublishError({
            topic: request.topic,
            reason:
              "the topic does not exist on the broker (automatic topic creation is off: " +
              `create it with \`effect-outbox topics ensure ${request.topic} --execute\`, then requeue)`
          })
        }
      }
      const count = layout.partitions
      const send = (partition: number): Target =>
        layout.leaderless?.includes(partition) === true ||
        (layout.stale === true && suspects.get(request.topic)?.has(partition) === true)
          ? {
              _tag: "Reject",
              error: new BrokerUnavailableError({
                topic: request.topic,
                partition,
                reason: `partition ${partition} has no leader; the topic's other partitions are sent`
              })
            }
          : { _tag: "Send", topic: request.topic, partition, leader: layout.leaders[partition] ?? -1 }
      if (request.partition !== null) {
        return Number.isInteger(request.partition) && request.partition >= 0 && request.partition < count
          ? send(request.partition)
          : {
              _tag: "Reject",
              error: new UnknownPartitionError({
                topic: request.topic,
                partition: request.partition,
                partitionCount: count
              })
            }
      }
      // Keyed records get the Java client's murmur2 partition, so the same key lands where other
      // Kafka clients put it; records without a key go round robin.
      if (request.key !== null) return send(keyPartition(request.key, count))
      const next = roundRobin.get(request.topic) ?? 0
      roundRobin.set(request.topic, next + 1)
      return send(next % count)
    }

    const noteUnavailable = (topic: string, partition: number) => {
      const set = suspects.get(topic) ?? new Set<number>()
      set.add(partition)
      suspects.set(topic, set)
    }

    return { fetch, layoutFor, target, noteUnavailable }
  })
