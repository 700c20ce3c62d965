/**
 * `TopicReader` on @platformatic/kafka: every retained record of a topic up to the last stable
 * offsets seen when the read starts, read with group-less read_committed fetches (no consumer
 * group, nothing committed, nothing left behind; aborted transactions' records left out), as the
 * kafkajs reader reads.
 *
 * @since 0.1.0
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { type PositionedRead, positionedRange, TopicReader } from "@effect-outbox/core/TopicReader"
import type { Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { bounds, fetchOnce, type Range } from "./internal/partitionFetch.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { isUnknownTopic, toConsumerError } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticTopicReaderOptions {
  /** Bytes asked for per fetch (default 1 MiB). */
  readonly fetchBytes?: number | undefined
}

const readRange = (consumer: Consumer, topic: string, range: Range, fetchBytes: number) =>
  Stream.paginate(range.start, (from) =>
    from >= range.end
      ? Effect.succeed([[] as ReadonlyArray<ConsumerRecord>, Option.none<bigint>()] as const)
      : Effect.map(fetchOnce(consumer, topic, range, from, fetchBytes, "committed"), ({ next, records }) => {
          const more = next > from && next < range.end ? Option.some(next) : Option.none<bigint>()
          return [records, more] as const
        })
  )

/**
 * @since 0.1.0
 * @category operations
 */
export const read = (
  consumer: Consumer,
  topic: string,
  options: PlatformaticTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> =>
  Stream.unwrap(
    Effect.map(bounds(consumer, topic, "committed"), (ranges) =>
      Stream.fromIterable(ranges).pipe(
        Stream.flatMap((range) => readRange(consumer, topic, range, options.fetchBytes ?? 1_048_576))
      )
    )
  ).pipe(
    Stream.mapError((error) =>
      isUnknownTopic(error)
        ? new ConsumerSourceError({ operation: "read", reason: `topic ${topic} does not exist`, retriable: false })
        : toConsumerError("read", error)
    )
  )

/**
 * The retained records at `offsets` of one partition: one ranged read from the lowest wanted
 * offset to the highest, kept to the wanted ones.
 *
 * @since 0.1.0
 * @category operations
 */
export const readAt = (
  consumer: Consumer,
  request: PositionedRead,
  options: PlatformaticTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => {
  const wanted = new Set(request.offsets.map((o) => BigInt(o).toString()))
  return Stream.unwrap(
    Effect.map(bounds(consumer, request.topic, "committed"), (ranges) => {
      const retained = ranges.find((r) => r.partition === request.partition)
      const range = retained && positionedRange(request.offsets, retained.start, retained.end)
      return range === undefined
        ? Stream.empty
        : readRange(
            consumer,
            request.topic,
            { partition: request.partition, ...range },
            options.fetchBytes ?? 1_048_576
          )
    })
  ).pipe(
    Stream.filter((record) => wanted.has(record.offset)),
    Stream.mapError((error) =>
      isUnknownTopic(error)
        ? new ConsumerSourceError({
            operation: "read",
            reason: `topic ${request.topic} does not exist`,
            retriable: false
          })
        : toConsumerError("read", error)
    )
  )
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticTopicReaderOptions = {}
): Effect.Effect<TopicReader["Service"], never, PlatformaticClient> =>
  Effect.gen(function* () {
    const { offsets } = yield* PlatformaticClient
    return TopicReader.of({
      read: (topic) => read(offsets, topic, options),
      readAt: (request) => readAt(offsets, request, options)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTopicReaderOptions = {}
): Layer.Layer<TopicReader, never, PlatformaticClient> => Layer.effect(TopicReader)(make(options))
