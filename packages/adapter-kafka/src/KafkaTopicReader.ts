/**
 * `TopicReader` on kafkajs: reads every retained record of a topic up to the high
 * watermarks seen when the read starts, with a throwaway consumer that commits nothing. Used to
 * inspect and replay dead letters.
 *
 * kafkajs has no group-less "assign" mode, so the reader joins a consumer group of its own
 * (unique id, no commits) and deletes that group when done (`internal/rangeRead`).
 *
 * @since 0.1.0
 */

import { randomUUID } from "node:crypto"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { type PositionedRead, TopicReader } from "@effect-outbox/core/TopicReader"
import * as TopicRead from "@effect-outbox/kafka/TopicRead"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import type Kafkajs from "kafkajs"
import { partitionBounds, readRanges } from "./internal/rangeRead.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { toConsumerRecord } from "./KafkaConsumerSource.ts"
import { protocol } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaTopicReaderOptions {
  /** Records buffered ahead of the stream's consumer (default 1000). */
  readonly bufferSize?: number | undefined
  /** Prefix of the throwaway consumer groups (default `effect-outbox-reader`). */
  readonly groupPrefix?: string | undefined
}

/** The kafkajs side of the reader: offsets on a short-lived admin, ranges by a throwaway consumer. */
const driver = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  options: KafkaTopicReaderOptions
): TopicRead.TopicReadDriver => ({
  protocol,
  bounds: (topic) => partitionBounds(kafka, topic),
  read: (topic, ranges) =>
    TopicRead.fromCallbacks(options.bufferSize ?? 1_000, (offer) =>
      readRanges(
        kafka,
        admin,
        topic,
        ranges,
        { groupId: `${options.groupPrefix ?? "effect-outbox-reader"}-${randomUUID()}`, readUncommitted: false },
        async (partition, messages) => {
          await offer(messages.map((m) => toConsumerRecord(topic, partition, m)))
          return "continue"
        }
      )
    )
})

/**
 * @since 0.1.0
 * @category operations
 */
export const read = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  topic: string,
  options: KafkaTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => TopicRead.read(driver(kafka, admin, options), topic)

/**
 * The retained records at `offsets` of one partition (see `TopicRead.readAt`).
 *
 * @since 0.1.0
 * @category operations
 */
export const readAt = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: PositionedRead,
  options: KafkaTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> => TopicRead.readAt(driver(kafka, admin, options), request)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaTopicReaderOptions = {}
): Effect.Effect<TopicReader["Service"], never, KafkaClient> =>
  KafkaClient.useSync(({ admin, kafka }) => TopicRead.make(driver(kafka, admin, options)))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaTopicReaderOptions = {}): Layer.Layer<TopicReader, never, KafkaClient> =>
  Layer.effect(TopicReader)(make(options))
