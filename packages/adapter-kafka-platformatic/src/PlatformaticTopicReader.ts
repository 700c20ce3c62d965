/**
 * `TopicReader` on @platformatic/kafka: every retained record of a topic up to the last stable
 * offsets seen when the read starts, read with group-less read_committed fetches (no consumer
 * group, nothing committed, nothing left behind; aborted transactions' records left out), as the
 * kafkajs reader reads.
 *
 * @since 0.1.0
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { type PositionedRead, TopicReader } from "@effect-outbox/core/TopicReader"
import * as TopicRead from "@effect-outbox/kafka/TopicRead"
import type { Consumer } from "@platformatic/kafka"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import { bounds, readRanges } from "./internal/partitionFetch.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { protocol } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticTopicReaderOptions {
  /** Bytes asked for per fetch (default 1 MiB). */
  readonly fetchBytes?: number | undefined
}

const driver = (consumer: Consumer, options: PlatformaticTopicReaderOptions): TopicRead.TopicReadDriver => ({
  protocol,
  bounds: (topic) => bounds(consumer, topic),
  read: (topic, ranges) => readRanges(consumer, topic, ranges, "committed", options.fetchBytes)
})

/**
 * @since 0.1.0
 * @category operations
 */
export const read = (
  consumer: Consumer,
  topic: string,
  options: PlatformaticTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => TopicRead.read(driver(consumer, options), topic)

/**
 * The retained records at `offsets` of one partition (see `TopicRead.readAt`).
 *
 * @since 0.1.0
 * @category operations
 */
export const readAt = (
  consumer: Consumer,
  request: PositionedRead,
  options: PlatformaticTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => TopicRead.readAt(driver(consumer, options), request)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticTopicReaderOptions = {}
): Effect.Effect<TopicReader["Service"], never, PlatformaticClient> =>
  PlatformaticClient.useSync(({ offsets }) => TopicRead.make(driver(offsets, options)))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTopicReaderOptions = {}
): Layer.Layer<TopicReader, never, PlatformaticClient> => Layer.effect(TopicReader)(make(options))
