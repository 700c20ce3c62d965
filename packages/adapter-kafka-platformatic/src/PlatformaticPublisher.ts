/**
 * `Publisher` on @platformatic/kafka: the Kafka layer's publisher (explicit partitions, record
 * batches under each topic's `max.message.bytes`, a receipt per record) over the client's
 * idempotent producer — the same contract as the kafkajs driver's. A call's partitions go in one
 * `send` when each one's records fit one record batch (`combinePartitions`); otherwise, and after a
 * failed combined send, one `send` per partition batch, so every broker error is attributed to the
 * records it concerns.
 *
 * Keyed records without an explicit partition get the Java client's partition
 * (`murmur2(key) & 0x7fffffff`), as kafkajs computes it: the client's own default partitioner
 * (`murmur2(key) >>> 0`) would put some keys on other partitions, so switching adapters would
 * reorder those keys.
 *
 * @since 0.1.0
 */
import { Publisher as CorePublisher } from "@effect-outbox/core/Publisher"
import * as Publisher from "@effect-outbox/kafka/Publisher"
import { type CompressionAlgorithmValue, ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka"
import * as Layer from "effect/Layer"
import * as Driver from "./internal/driver.ts"
import { headerNameSerializer } from "./internal/headerNames.ts"
import * as Send from "./internal/send.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticPublisherOptions extends Publisher.PublisherOptions {
  /** Client retries inside one send (default 3). */
  readonly retries?: number | undefined
  readonly compression?: CompressionAlgorithmValue | undefined
}

/**
 * `keyPartition`: the partition the Java client (and kafkajs) gives a key,
 * `toPositive(murmur2(key)) % count` (core's `KeyPartition`). The publisher's metrics, and
 * `recordHeaders`: the headers sent with a record (the request's own, with `event-id`
 * guaranteed to be its id).
 *
 * @since 0.1.0
 */
export { keyPartition } from "@effect-outbox/core/KeyPartition"
export { producerResets, publishedRecords } from "@effect-outbox/kafka/Metrics"
export { recordHeaders } from "@effect-outbox/kafka/Publisher"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticPublisherOptions = {}) =>
  PlatformaticClient.use((client) =>
    Publisher.make(
      Driver.make(client),
      {
        create: (): Send.AnyProducer =>
          new Producer<Buffer | undefined, Buffer, string, string>({
            ...client.baseOptions,
            idempotent: true,
            acks: ProduceAcks.ALL,
            autocreateTopics: false,
            // Our partitions are final: a stale-metadata retry must not re-route them.
            repeatOnStaleMetadata: false,
            // The producer's own metadata is kept (as kafkajs keeps its producer's) instead of
            // re-read every 5 s: while a partition of the topic has no leader the client cannot
            // read the topic's metadata at all, and the partitions that have one must go on.
            // A growth or a moved leader replaces the producer (Publisher), which reads afresh.
            metadataMaxAge: 300_000,
            retries: options.retries ?? 3,
            serializers: { headerKey: headerNameSerializer(), headerValue: stringSerializer },
            ...(options.compression === undefined ? {} : { compression: options.compression })
          }),
        connect: () => Promise.resolve(),
        // Forced: a producer stuck on an unreachable broker never finishes a graceful close.
        disconnect: (producer) => producer.close(true),
        produce: Send.produce,
        uncompressed: options.compression === undefined || options.compression === "none",
        combinePartitions: options.combinePartitions ?? true
      },
      options
    )
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticPublisherOptions = {}
): Layer.Layer<CorePublisher, never, PlatformaticClient> => Layer.effect(CorePublisher)(make(options))
