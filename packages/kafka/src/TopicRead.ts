/**
 * `TopicReader` over any Kafka client: `read` streams every retained record of a topic up to the
 * ends seen when the read starts, `readAt` the wanted offsets of one partition (one ranged read
 * from the lowest to the highest, kept to the wanted ones). A missing topic fails with a
 * non-retriable `ConsumerSourceError` saying so. The client supplies how it reads a topic's bounds
 * and its ranges ({@link TopicReadDriver}).
 *
 * @since 0.1.0
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { type PositionedRead, positionedRange, TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type { Protocol } from "./KafkaProtocol.ts"
import type { PartitionBounds, Range } from "./Probe.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface TopicReadDriver {
  readonly protocol: Protocol
  /** Every partition's retained `[low, high)`, read when called; fails for a missing topic. */
  readonly bounds: (
    topic: string
  ) => Effect.Effect<ReadonlyArray<Pick<PartitionBounds, "partition" | "low" | "high">>, unknown>
  /** The records of `ranges` (never empty), each range in offset order. */
  readonly read: (topic: string, ranges: ReadonlyArray<Range>) => Stream.Stream<ConsumerRecord, unknown>
}

/**
 * The records a callback-driven client hands over, as a stream: `run` reads, offering each lot
 * (the offer waits while `bufferSize` records wait: the stream's consumer sets the pace), and its
 * end or failure ends the stream.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromCallbacks = (
  bufferSize: number,
  run: (offer: (records: ReadonlyArray<ConsumerRecord>) => Promise<unknown>) => Effect.Effect<void, unknown>
): Stream.Stream<ConsumerRecord, unknown> =>
  Stream.callback<ConsumerRecord, unknown>(
    (queue) =>
      Effect.gen(function* () {
        // The client calls back outside any fiber: run what it hands over with the reader's
        // context (its tracer, logger and services), not on a bare default runtime.
        const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
        yield* run((records) => runPromise(Queue.offerAll(queue, records))).pipe(
          Effect.matchCauseEffect({
            onSuccess: () => Queue.end(queue),
            onFailure: (cause) => Queue.failCause(queue, cause)
          }),
          Effect.forkScoped
        )
        // Runs before the read is interrupted: a waiting offer must give up, or the client would
        // wait for its callback forever.
        yield* Effect.addFinalizer(() => Queue.shutdown(queue))
      }),
    { bufferSize, strategy: "suspend" }
  )

/**
 * The records of `ranges`, each read by repeated `fetch`es from its start: a fetch answers the
 * records found from `from` and the offset to fetch next; one that makes no progress ends its range.
 *
 * @since 0.1.0
 * @category constructors
 */
export const paged = <E>(
  ranges: ReadonlyArray<Range>,
  fetch: (
    range: Range,
    from: bigint
  ) => Effect.Effect<{ readonly records: ReadonlyArray<ConsumerRecord>; readonly next: bigint }, E>
): Stream.Stream<ConsumerRecord, E> =>
  Stream.fromIterable(ranges).pipe(
    Stream.flatMap((range) =>
      Stream.paginate(range.start, (from) =>
        from >= range.end
          ? Effect.succeed([[] as ReadonlyArray<ConsumerRecord>, Option.none<bigint>()] as const)
          : Effect.map(fetch(range, from), ({ next, records }) => {
              const more = next > from && next < range.end ? Option.some(next) : Option.none<bigint>()
              return [records, more] as const
            })
      )
    )
  )

const within = (
  driver: TopicReadDriver,
  topic: string,
  pick: (ranges: ReadonlyArray<Range>) => ReadonlyArray<Range>
): Stream.Stream<ConsumerRecord, ConsumerSourceError> =>
  Stream.unwrap(
    Effect.map(driver.bounds(topic), (bounds) => {
      const retained = bounds.map(({ high, low, partition }) => ({ partition, start: low, end: high }))
      const ranges = pick(retained).filter((r) => r.start < r.end)
      return ranges.length === 0 ? Stream.empty : driver.read(topic, ranges)
    })
  ).pipe(
    Stream.mapError((error) =>
      driver.protocol.isUnknownTopic(error)
        ? new ConsumerSourceError({ operation: "read", reason: `topic ${topic} does not exist`, retriable: false })
        : driver.protocol.toConsumerError("read", error)
    )
  )

/**
 * @since 0.1.0
 * @category operations
 */
export const read = (driver: TopicReadDriver, topic: string): Stream.Stream<ConsumerRecord, ConsumerSourceError> =>
  within(driver, topic, (ranges) => ranges).pipe(Stream.withSpan("kafka.topicReader.read", { attributes: { topic } }))

/**
 * @since 0.1.0
 * @category operations
 */
export const readAt = (
  driver: TopicReadDriver,
  request: PositionedRead
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => {
  const wanted = new Set(request.offsets.map((o) => BigInt(o).toString()))
  return within(driver, request.topic, (ranges) => {
    const retained = ranges.find((r) => r.partition === request.partition)
    const range = retained && positionedRange(request.offsets, retained.start, retained.end)
    return range === undefined ? [] : [{ partition: request.partition, ...range }]
  }).pipe(
    Stream.filter((record) => wanted.has(record.offset)),
    Stream.withSpan("kafka.topicReader.readAt", {
      attributes: { topic: request.topic, partition: request.partition, offsets: request.offsets.length }
    })
  )
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: TopicReadDriver): TopicReader["Service"] =>
  TopicReader.of({ read: (topic) => read(driver, topic), readAt: (request) => readAt(driver, request) })
