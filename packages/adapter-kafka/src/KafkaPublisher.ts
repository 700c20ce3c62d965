/**
 * `Publisher` on kafkajs: the Kafka layer's publisher (explicit partitions, record batches under
 * each topic's limit, a receipt per record) over kafkajs's idempotent producer. One broker's
 * partitions of a call go in one `sendBatch` when each fits one record batch: kafkajs sends one
 * request per broker at a time.
 *
 * @since 0.1.0
 */
import { Publisher as CorePublisher } from "@effect-outbox/core/Publisher"
import * as Publisher from "@effect-outbox/kafka/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import Kafkajs from "kafkajs"
import * as Driver from "./internal/driver.ts"
import { KafkaClient } from "./KafkaClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaPublisherOptions extends Publisher.PublisherOptions {
  /** kafkajs retries inside one call before giving up (default 5). */
  readonly retries?: number | undefined
  /** At most 5 keeps the idempotent producer's ordering guarantee (default 5). */
  readonly maxInFlightRequests?: number | undefined
  readonly compression?: Kafkajs.CompressionTypes | undefined
}

/**
 * The publisher's metrics, and `recordHeaders`: the headers sent with a record (the request's
 * own, with `event-id` guaranteed to be its id).
 *
 * @since 0.1.0
 */
export { producerResets, publishedRecords } from "@effect-outbox/kafka/Metrics"
export { recordHeaders } from "@effect-outbox/kafka/Publisher"

/**
 * One `sendBatch` holding every part (kafkajs sends one produce request per broker): each part's
 * base offset, `undefined` for a part kafkajs skipped because its metadata lacked the partition.
 */
const produce = (
  producer: Kafkajs.Producer,
  parts: ReadonlyArray<Publisher.Part>,
  compression: Kafkajs.CompressionTypes | undefined
) => {
  const topics = [...new Set(parts.map((part) => part.topic))]
  return producer
    .sendBatch({
      acks: -1,
      ...(compression === undefined ? {} : { compression }),
      topicMessages: topics.map((topic) => ({
        topic,
        messages: parts
          .filter((part) => part.topic === topic)
          .flatMap((part) =>
            part.records.map((record) => ({
              key: record.key,
              value: Publisher.toBuffer(record.payload),
              partition: part.partition,
              headers: { ...record.headers }
            }))
          )
      }))
    })
    .then((metadata) =>
      parts.map((part) => {
        const found = metadata.find((m) => m.topicName === part.topic && m.partition === part.partition)
        return found !== undefined && found.errorCode === 0 && found.baseOffset !== undefined
          ? BigInt(found.baseOffset)
          : undefined
      })
    )
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: KafkaPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* KafkaClient
    const maxInFlightRequests = Math.min(5, Math.max(1, options.maxInFlightRequests ?? 5))
    return yield* Publisher.make(
      Driver.make(client),
      {
        create: () =>
          // On the short cluster retry: a partition without a leader is answered at once.
          (client.publishing ?? client.kafka).producer({
            idempotent: true,
            maxInFlightRequests,
            allowAutoTopicCreation: false,
            // Bounded: an idempotent producer that gives up is replaced before the next send.
            retry: { retries: options.retries ?? 5, initialRetryTime: 100, maxRetryTime: 2_000 }
          }),
        connect: (producer) => producer.connect(),
        disconnect: (producer) => producer.disconnect(),
        produce: (producer, parts) => produce(producer, parts, options.compression),
        uncompressed: options.compression === undefined || options.compression === Kafkajs.CompressionTypes.None,
        combinePartitions: options.combinePartitions ?? true,
        // kafkajs refreshes metadata for every topic a producer ever sent to, and once one of
        // them is deleted every refresh fails until the producer is replaced.
        listTopics: () => client.admin.listTopics()
      },
      options
    )
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaPublisherOptions = {}): Layer.Layer<CorePublisher, never, KafkaClient> =>
  Layer.effect(CorePublisher)(make(options))
