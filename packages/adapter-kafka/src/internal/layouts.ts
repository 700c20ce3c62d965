/**
 * The publisher's view of topic layouts: partition metadata cached for `maxAge`, re-read when a
 * request names a partition the cache lacks, and where each request goes (its explicit partition,
 * or the Java client's murmur2 partition of its key).
 */
import { PermanentPublishError, type PublishError, UnknownPartitionError } from "@effect-outbox/core/Errors"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import Kafkajs from "kafkajs"
import { rootCause } from "../KafkaErrors.ts"

export interface TopicLayout {
  readonly partitions: ReadonlyArray<Kafkajs.PartitionMetadata>
  readonly fetchedAt: number
}

export type Target =
  | { readonly _tag: "Send"; readonly topic: string; readonly partition: number; readonly leader: number }
  | { readonly _tag: "Reject"; readonly error: PublishError }

export interface Layouts {
  /** Fresh metadata; `undefined` when the topic does not exist. */
  readonly fetch: (topic: string) => Effect.Effect<TopicLayout | undefined, unknown>
  /** Cached layout unless stale, or unless some request targets a partition it lacks. */
  readonly layoutFor: (
    topic: string,
    requests: ReadonlyArray<PublishRequest>
  ) => Effect.Effect<TopicLayout | undefined, unknown>
  readonly target: (request: PublishRequest, layout: TopicLayout | undefined) => Target
}

/** `onGrown` runs when a topic shows more partitions than before (the producer's own metadata may predate it). */
export const make = (admin: Kafkajs.Admin, maxAge: number, onGrown: () => void): Layouts => {
  const layouts = new Map<string, TopicLayout>()
  // Keyed records without an explicit partition get the Java client's murmur2 partition, so the
  // same key lands where other Kafka clients would put it; we compute it ourselves to know every
  // record's partition before sending (core's `KeyPartition`). Records without a key go round robin,
  // by kafkajs's partitioner.
  const partitioner = Kafkajs.Partitioners.DefaultPartitioner()

  const fetch = (topic: string) =>
    Effect.tryPromise({
      try: () => admin.fetchTopicMetadata({ topics: [topic] }),
      catch: (error) => error
    }).pipe(
      Effect.map((metadata) => {
        const found = metadata.topics.find((t) => t.name === topic)
        if (found === undefined) return undefined
        const layout: TopicLayout = {
          partitions: [...found.partitions].sort((a, b) => a.partitionId - b.partitionId),
          fetchedAt: Date.now()
        }
        const previous = layouts.get(topic)
        if (previous !== undefined && previous.partitions.length < layout.partitions.length) onGrown()
        layouts.set(topic, layout)
        return layout
      }),
      Effect.catch((error) =>
        rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION"
          ? Effect.sync(() => {
              layouts.delete(topic)
              return undefined
            })
          : Effect.fail(error)
      )
    )

  const layoutFor = (topic: string, requests: ReadonlyArray<PublishRequest>) => {
    const cached = layouts.get(topic)
    const wanted = requests.reduce(
      (max, r) => (r.topic === topic && r.partition !== null ? Math.max(max, r.partition) : max),
      -1
    )
    return cached !== undefined && Date.now() - cached.fetchedAt < maxAge && wanted < cached.partitions.length
      ? Effect.succeed(cached)
      : fetch(topic)
  }

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
    const count = layout.partitions.length
    // Partitions are sorted by id, so a partition's metadata is at its index.
    const leaderOf = (partition: number) => layout.partitions[partition]!.leader
    if (request.partition !== null) {
      return Number.isInteger(request.partition) && request.partition >= 0 && request.partition < count
        ? { _tag: "Send", topic: request.topic, partition: request.partition, leader: leaderOf(request.partition) }
        : {
            _tag: "Reject",
            error: new UnknownPartitionError({
              topic: request.topic,
              partition: request.partition,
              partitionCount: count
            })
          }
    }
    const partition =
      request.key !== null
        ? keyPartition(request.key, count)
        : partitioner({
            topic: request.topic,
            partitionMetadata: [...layout.partitions],
            message: { key: null, value: null }
          })
    return { _tag: "Send", topic: request.topic, partition, leader: leaderOf(partition) }
  }

  return { fetch, layoutFor, target }
}
