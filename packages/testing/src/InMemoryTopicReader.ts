/**
 * `TopicReader` over the in-memory broker: a snapshot of a topic's records, partition by
 * partition in offset order, taken when the read starts (so replaying into the same broker
 * always terminates).
 *
 * @since 0.1.0
 */
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { InMemoryBroker } from "./InMemoryBroker.ts"

/**
 * Reads the broker in context. Provide it with (after) `InMemoryBroker.layer`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<TopicReader, never, InMemoryBroker> = Layer.effect(TopicReader)(
  Effect.gen(function* () {
    const broker = yield* InMemoryBroker
    const exists = (topic: string) =>
      Effect.flatMap(broker.topics, (topics) =>
        topics.has(topic)
          ? Effect.void
          : Effect.fail(
              new ConsumerSourceError({ operation: "read", reason: `topic ${topic} does not exist`, retriable: false })
            )
      )
    return {
      read: (topic) =>
        Stream.unwrap(Effect.andThen(exists(topic), Effect.map(broker.records(topic), Stream.fromIterable))),
      readAt: ({ offsets, partition, topic }) =>
        Stream.unwrap(
          Effect.andThen(
            exists(topic),
            Effect.map(broker.log(topic, partition), (records) => {
              const wanted = new Set(offsets.map((o) => BigInt(o).toString()))
              return Stream.fromIterable(records.filter((r) => wanted.has(r.offset)))
            })
          )
        )
    }
  })
)
