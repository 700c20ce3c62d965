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
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Driver from "./internal/driver.ts"
import * as Send from "./internal/send.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticPublisherOptions {
  /**
   * Upper bound on one publish call, retries included (default 8000); a partition batch that runs
   * out reports `BrokerUnavailableError` (the records may or may not have landed). Needed here
   * more than with kafkajs: a send to an unreachable broker does not settle by itself.
   */
  readonly publishTimeoutMillis?: number | undefined
  /** Client retries inside one send (default 3). */
  readonly retries?: number | undefined
  /** How long partition counts are cached before a publish re-reads them (default 5000). */
  readonly metadataMaxAgeMillis?: number | undefined
  readonly compression?: CompressionAlgorithmValue | undefined
  /**
   * Send a call's partitions in one `send` when each partition's records fit one record batch
   * (default `true`): one produce request per broker instead of one per partition. A failed
   * combined send replaces the producer and sends the call again per partition, so partitions that
   * had landed are written twice (never lost); `false` keeps one send per partition batch.
   */
  readonly combinePartitions?: boolean | undefined
}

export {
  /**
   * The partition the Java client (and kafkajs) gives a key: `toPositive(murmur2(key)) % count`
   * (core's `KeyPartition`, shared with the kafkajs driver and the in-memory broker).
   *
   * @since 0.1.0
   * @category partitioning
   */
  keyPartition
} from "@effect-outbox/core/KeyPartition"
export {
  /**
   * @since 0.1.0
   * @category metrics
   */
  producerResets,
  /**
   * @since 0.1.0
   * @category metrics
   */
  publishedRecords
} from "@effect-outbox/kafka/Metrics"
export {
  /**
   * The headers sent with a record: the request's own, with `event-id` guaranteed to be its id.
   *
   * @since 0.1.0
   * @category encoding
   */
  recordHeaders
} from "@effect-outbox/kafka/Publisher"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    return yield* Publisher.make(
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
            serializers: { headerKey: stringSerializer, headerValue: stringSerializer },
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
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticPublisherOptions = {}
): Layer.Layer<CorePublisher, never, PlatformaticClient> => Layer.effect(CorePublisher)(make(options))
