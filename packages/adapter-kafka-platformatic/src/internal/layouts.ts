/**
 * The publisher's view of topic layouts: partition counts cached for `maxAge`, re-read when a
 * request names a partition the cache lacks, and where each request goes (its explicit
 * partition, the Java client's murmur2 partition of its key, or round robin).
 *
 * @internal
 */
import { PermanentPublishError, type PublishError, UnknownPartitionError } from "@effect-outbox/core/Errors"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import type { Admin } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import { isUnknownTopic } from "../PlatformaticErrors.ts"

export interface TopicLayout {
  readonly partitions: number
  readonly fetchedAt: number
}

export type Target =
  | { readonly _tag: "Send"; readonly topic: string; readonly partition: number }
  | { readonly _tag: "Reject"; readonly error: PublishError }

export interface Layouts {
  /** Fresh metadata; `undefined` when the topic does not exist. */
  readonly fetch: (topic: string) => Effect.Effect<TopicLayout | undefined, unknown>
  /** Cached layout unless stale, or unless some request targets a partition it lacks. */
  readonly layoutFor: (
    topic: string,
    requests: ReadonlyArray<PublishRequest>
  ) => Effect.Effect<TopicLayout | undefined, unknown>
  readonly target: (request: PublishRequest, layout: { readonly partitions: number } | undefined) => Target
}

/** `onGrown` runs when a topic shows more partitions than before (the producer's own metadata may predate it). */
export const make = (admin: Admin, maxAge: number, onGrown: () => void): Layouts => {
  const layouts = new Map<string, TopicLayout>()
  const roundRobin = new Map<string, number>()

  const fetch = (topic: string) =>
    Effect.tryPromise({
      try: () => admin.metadata({ topics: [topic], forceUpdate: true }),
      catch: (error) => error
    }).pipe(
      Effect.map((metadata) => {
        const found = metadata.topics.get(topic)
        if (found === undefined) return undefined
        const previous = layouts.get(topic)
        if (previous !== undefined && previous.partitions < found.partitionsCount) onGrown()
        const layout = { partitions: found.partitionsCount, fetchedAt: Date.now() }
        layouts.set(topic, layout)
        return layout
      }),
      Effect.catch((error) =>
        isUnknownTopic(error)
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
    return cached !== undefined && Date.now() - cached.fetchedAt < maxAge && wanted < cached.partitions
      ? Effect.succeed(cached)
      : fetch(topic)
  }

  const target = (request: PublishRequest, layout: { readonly partitions: number } | undefined): Target => {
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
    if (request.partition !== null) {
      return Number.isInteger(request.partition) && request.partition >= 0 && request.partition < count
        ? { _tag: "Send", topic: request.topic, partition: request.partition }
        : {
            _tag: "Reject",
            error: new UnknownPartitionError({
              topic: request.topic,
              partition: request.partition,
              partitionCount: count
            })
          }
    }
    if (request.key !== null) return { _tag: "Send", topic: request.topic, partition: keyPartition(request.key, count) }
    const next = roundRobin.get(request.topic) ?? 0
    roundRobin.set(request.topic, next + 1)
    return { _tag: "Send", topic: request.topic, partition: next % count }
  }

  return { fetch, layoutFor, target }
}
