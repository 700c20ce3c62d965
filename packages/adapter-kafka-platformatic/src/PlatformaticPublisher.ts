/**
 * `Publisher` on @platformatic/kafka: an idempotent producer with acks=-1, explicit partitions and
 * a receipt per record in request order. A call's partitions go in one `send` when each one's
 * records fit one record batch (`combinePartitions`); otherwise, and after a failed combined send,
 * each partition's records go in record batches under the topic's `max.message.bytes`, one `send`
 * per batch, so every broker error is attributed to the records it concerns — the same contract
 * as the kafkajs adapter's `KafkaPublisher`.
 *
 * Keyed records without an explicit partition get the Java client's partition
 * (`murmur2(key) & 0x7fffffff`), as kafkajs computes it: the client's own default partitioner
 * (`murmur2(key) >>> 0`) would put some keys on other partitions, so switching adapters would
 * reorder those keys.
 *
 * @since 0.1.0
 */
import { BrokerUnavailableError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER } from "@effect-outbox/core/OutboxMessage"
import * as PartitionSend from "@effect-outbox/core/PartitionSend"
import * as ProducerLeases from "@effect-outbox/core/ProducerLeases"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import { type CompressionAlgorithmValue, ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import * as Combined from "./internal/combined.ts"
import * as Layouts from "./internal/layouts.ts"
import * as Send from "./internal/send.ts"
import * as TopicLimits from "./internal/topicLimits.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, isRecordSizeError, toPublishError } from "./PlatformaticErrors.ts"

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

/**
 * @since 0.1.0
 * @category metrics
 */
export const publishedRecords = Metric.counter("outbox_kafka_published_records_total", {
  description: "Records the Kafka publisher got a broker acknowledgement for",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const producerResets = Metric.counter("outbox_kafka_producer_resets_total", {
  description: "Idempotent producers replaced after an uncertain failure or a partition-count change",
  incremental: true
})

export {
  /**
   * The partition the Java client (and kafkajs) gives a key: `toPositive(murmur2(key)) % count`
   * (core's `KeyPartition`, shared with the kafkajs adapter and the in-memory broker).
   *
   * @since 0.1.0
   * @category partitioning
   */
  keyPartition
} from "@effect-outbox/core/KeyPartition"

/**
 * The headers sent with a record: the request's own, with `event-id` guaranteed to be its id.
 *
 * @since 0.1.0
 * @category encoding
 */
export const recordHeaders = (request: PublishRequest): Record<string, string> => ({
  ...request.headers,
  [EVENT_ID_HEADER]: request.id
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    const timeoutMillis = options.publishTimeoutMillis ?? 8_000

    // One producer at a time, replaced (a fresh producer id) after an uncertain failure or a
    // timeout; sends hold it by reference so a reset never closes it under them.
    const leases = yield* ProducerLeases.make<Send.AnyProducer>({
      create: () =>
        new Producer<Buffer | undefined, Buffer, string, string>({
          ...client.baseOptions,
          idempotent: true,
          acks: ProduceAcks.ALL,
          autocreateTopics: false,
          // Our partitions are final: a stale-metadata retry must not re-route them.
          repeatOnStaleMetadata: false,
          retries: options.retries ?? 3,
          serializers: { headerKey: stringSerializer, headerValue: stringSerializer },
          ...(options.compression === undefined ? {} : { compression: options.compression })
        }),
      connect: () => Promise.resolve(),
      // Forced: a producer stuck on an unreachable broker never finishes a graceful close.
      disconnect: (producer) => producer.close(true),
      onReplace: Metric.update(producerResets, 1)
    })
    yield* Effect.addFinalizer(() => leases.closeAll)
    const sender: Send.Sender = {
      leases,
      // The producer's own metadata may predate a growth: replace it.
      layouts: Layouts.make(client.admin, options.metadataMaxAgeMillis ?? 5_000, leases.requestReset),
      timeoutMillis
    }
    const limits = TopicLimits.make(client.admin)
    const uncompressed = options.compression === undefined || options.compression === "none"
    const combine = options.combinePartitions ?? true
    const onSent = (records: number) => Metric.update(publishedRecords, records)

    // One partition's records, in record batches under the topic's limit (core PartitionSend).
    const sendPartition = (group: PartitionGroup, deadline: number, outcomes: Array<PublishOutcome | undefined>) =>
      PartitionSend.sendPartition(
        {
          limitFor: limits.limitFor,
          invalidateLimit: limits.invalidate,
          send: (topic, partition, batch) => Send.sendRecords(sender, topic, partition, batch, deadline),
          isRecordSizeError: (error) => !(error instanceof Send.SendError) && isRecordSizeError(error),
          verdict: (topic, error) => (error instanceof Send.SendError ? error.verdict : toPublishError(topic, error)),
          describe,
          uncompressed,
          onSent
        },
        group.topic,
        group.partition,
        group.records,
        outcomes
      )

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
        const deadline = Date.now() + timeoutMillis
        const outcomes: Array<PublishOutcome | undefined> = new Array(requests.length)
        const groups = [...(yield* partitionGroups(sender.layouts, requests, deadline, outcomes)).values()]
        // One send for every partition when they fit; else, or after it failed, one per partition.
        if (
          combine &&
          groups.length > 1 &&
          (yield* Combined.fits(groups, limits.limitFor)) &&
          (yield* Combined.send(sender, groups, deadline, outcomes, onSent))
        )
          return outcomes as ReadonlyArray<PublishOutcome>
        yield* Effect.forEach(groups, (group) => sendPartition(group, deadline, outcomes), {
          concurrency: "unbounded",
          discard: true
        })
        return outcomes as ReadonlyArray<PublishOutcome>
      }).pipe(
        Effect.withSpan("kafka.publish", { attributes: { records: requests.length } }, { captureStackTrace: false })
      )

    return Publisher.of({ publish })
  })

/** Records of one call bound for one partition, in request order. */
interface PartitionGroup {
  readonly topic: string
  readonly partition: number
  readonly records: Array<Send.Outgoing>
}

/**
 * Where each record goes, decided before sending, grouped by partition in request order. Records
 * that cannot be sent (no such topic or partition, no metadata answer before `deadline`) get their
 * outcome in `outcomes` at once.
 */
const partitionGroups = (
  layouts: Layouts.Layouts,
  requests: ReadonlyArray<PublishRequest>,
  deadline: number,
  outcomes: Array<PublishOutcome | undefined>
) =>
  Effect.gen(function* () {
    const targets: Array<Layouts.Target> = new Array(requests.length)
    for (const topic of new Set(requests.map((r) => r.topic))) {
      const layout = yield* layouts.layoutFor(topic, requests).pipe(
        Effect.timeoutOrElse({
          duration: Math.max(1, deadline - Date.now()),
          orElse: () => Effect.fail(new BrokerUnavailableError({ topic, reason: "no metadata answer in time" }))
        }),
        Effect.result
      )
      requests.forEach((request, i) => {
        if (request.topic !== topic) return
        targets[i] = Result.isFailure(layout)
          ? {
              _tag: "Reject",
              error:
                layout.failure instanceof BrokerUnavailableError
                  ? layout.failure
                  : toPublishError(topic, layout.failure)
            }
          : layouts.target(request, layout.success)
      })
    }
    const groups = new Map<string, PartitionGroup>()
    requests.forEach((request, index) => {
      const t = targets[index]!
      if (t._tag === "Reject") {
        outcomes[index] = Result.fail(t.error)
        return
      }
      const slot = `${t.topic}\u0000${t.partition}`
      const group = groups.get(slot) ?? { topic: t.topic, partition: t.partition, records: [] }
      group.records.push({ index, key: request.key, headers: recordHeaders(request), payload: request.payload })
      groups.set(slot, group)
    })
    return groups
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: PlatformaticPublisherOptions = {}): Layer.Layer<Publisher, never, PlatformaticClient> =>
  Layer.effect(Publisher)(make(options))
