/**
 * `Publisher` on kafkajs: an idempotent producer, explicit partitions, and a receipt per record
 * in request order. Each partition's records go in record batches under the topic's
 * `max.message.bytes`, one `sendBatch` per batch (or one combined request per broker when every
 * partition of the call fits one batch), so every broker error is attributed to the records it
 * concerns.
 *
 * @since 0.1.0
 */
import { EVENT_ID_HEADER } from "@effect-outbox/core/OutboxMessage"
import * as PartitionSend from "@effect-outbox/core/PartitionSend"
import * as ProducerLeases from "@effect-outbox/core/ProducerLeases"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import Kafkajs from "kafkajs"
import * as Combined from "./internal/combined.ts"
import * as Layouts from "./internal/layouts.ts"
import * as Send from "./internal/send.ts"
import * as TopicLimits from "./internal/topicLimits.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, isRecordSizeError, toPublishError } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaPublisherOptions {
  /**
   * Upper bound on one publish call, retries included (default 8000). A partition batch that runs
   * out reports `BrokerUnavailableError` for its records: they may or may not have landed.
   * Below the relay's default `publishTimeout` (10 s) on purpose: the publisher answers first, so
   * the receipts of partitions that did land are kept instead of the whole call timing out.
   */
  readonly publishTimeoutMillis?: number | undefined
  /** kafkajs retries inside one call before giving up (default 5). */
  readonly retries?: number | undefined
  /** How long partition counts are cached before a publish re-reads them (default 5000). */
  readonly metadataMaxAgeMillis?: number | undefined
  /** At most 5 keeps the idempotent producer's ordering guarantee (default 5). */
  readonly maxInFlightRequests?: number | undefined
  readonly compression?: Kafkajs.CompressionTypes | undefined
  /**
   * Send a call's partitions in one produce request when each fits one record batch (default
   * true). kafkajs's idempotent producer sends one request per broker at a time, so separate
   * per-partition requests cost a round trip each. A failed combined request replaces the
   * producer and the call is sent again per partition, so partitions that had landed are
   * published twice (never lost). `false`: always one request per partition.
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

/**
 * The headers sent with a record: the request's own (as given, they already carry `event-id`
 * and `traceparent`), with `event-id` guaranteed to be the request's id.
 *
 * @since 0.1.0
 * @category encoding
 */
export const recordHeaders = (request: PublishRequest): Record<string, string> =>
  request.writeEventId === false ? { ...request.headers } : { ...request.headers, [EVENT_ID_HEADER]: request.id }

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: KafkaPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* KafkaClient
    const timeoutMillis = options.publishTimeoutMillis ?? 8_000
    const maxInFlightRequests = Math.min(5, Math.max(1, options.maxInFlightRequests ?? 5))
    // One producer at a time; replaced (fresh producer id) after an uncertain failure, see
    // KafkaErrors.requiresProducerReset, and after a topic grew (kafkajs would otherwise drop
    // records for partitions its cached metadata lacks). Sends hold it by reference.
    // kafkajs refreshes metadata for every topic a producer ever sent to, and once one of them
    // is deleted every refresh fails (UNKNOWN_TOPIC_OR_PARTITION) until the producer is
    // replaced. So we remember those topics (`targeted`) and check they still exist, at most
    // once a second.
    const targeted = new Set<string>()
    const leases = yield* ProducerLeases.make<Kafkajs.Producer>({
      create: () =>
        client.kafka.producer({
          idempotent: true,
          maxInFlightRequests,
          allowAutoTopicCreation: false,
          // Bounded: an idempotent producer that gives up is replaced before the next send.
          retry: { retries: options.retries ?? 5, initialRetryTime: 100, maxRetryTime: 2_000 }
        }),
      connect: (producer) => producer.connect(),
      disconnect: (producer) => producer.disconnect(),
      onReplace: Effect.andThen(
        Metric.update(producerResets, 1),
        Effect.sync(() => targeted.clear())
      )
    })
    yield* Effect.addFinalizer(() => leases.closeAll)
    const sender: Send.Sender = {
      leases,
      // The producer's own metadata may predate a growth: replace it.
      layouts: Layouts.make(client.admin, options.metadataMaxAgeMillis ?? 5_000, leases.requestReset),
      targeted,
      compression: options.compression,
      timeoutMillis
    }
    const limits = TopicLimits.make(client.admin)
    const combine = options.combinePartitions ?? true
    const uncompressed = options.compression === undefined || options.compression === Kafkajs.CompressionTypes.None

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
    // One broker's partitions of a call (kafkajs sends one request to a broker at a time).
    const sendToLeader = (
      groups: ReadonlyArray<PartitionGroup>,
      deadline: number,
      outcomes: Array<PublishOutcome | undefined>
    ) =>
      Effect.gen(function* () {
        if (
          combine &&
          groups.length > 1 &&
          (yield* Combined.fits(groups, limits.limitFor)) &&
          (yield* Combined.send(sender, groups, deadline, outcomes, onSent))
        )
          return
        yield* Effect.forEach(groups, (group) => sendPartition(group, deadline, outcomes), {
          concurrency: "unbounded",
          discard: true
        })
      })
    const forgetDeleted = forgetDeletedTopics(client.admin, sender)

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
        const deadline = Date.now() + timeoutMillis
        const outcomes: Array<PublishOutcome | undefined> = new Array(requests.length)
        const groups = yield* partitionGroups(sender.layouts, requests, outcomes)
        if (groups.size === 0) return outcomes as ReadonlyArray<PublishOutcome>
        yield* forgetDeleted(new Set([...groups.values()].map((g) => g.topic)))
        // Each broker's partitions in parallel: one request for all of them when they fit, else
        // one per partition, each partition's batches in order.
        yield* Effect.forEach(
          byLeader(groups.values()),
          (leaderGroups) => sendToLeader(leaderGroups, deadline, outcomes),
          {
            concurrency: "unbounded",
            discard: true
          }
        )
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
  /** The partition's leader as the layout last read it. */
  readonly leader: number
  readonly records: Array<Send.Outgoing>
}

const byLeader = (groups: Iterable<PartitionGroup>): Array<Array<PartitionGroup>> => {
  const leaders = new Map<number, Array<PartitionGroup>>()
  for (const group of groups) {
    const of = leaders.get(group.leader)
    if (of === undefined) leaders.set(group.leader, [group])
    else of.push(group)
  }
  return [...leaders.values()]
}

/**
 * Where each record goes, decided before sending (kafkajs silently drops records for a partition
 * its metadata lacks), grouped by partition in request order. Records that cannot be sent get
 * their outcome in `outcomes` at once.
 */
const partitionGroups = (
  layouts: Layouts.Layouts,
  requests: ReadonlyArray<PublishRequest>,
  outcomes: Array<PublishOutcome | undefined>
) =>
  Effect.gen(function* () {
    const targets: Array<Layouts.Target> = new Array(requests.length)
    for (const topic of new Set(requests.map((r) => r.topic))) {
      const layout = yield* layouts.layoutFor(topic, requests).pipe(Effect.result)
      requests.forEach((request, i) => {
        if (request.topic !== topic) return
        targets[i] = Result.isFailure(layout)
          ? { _tag: "Reject", error: toPublishError(topic, layout.failure) }
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
      const group = groups.get(slot) ?? { topic: t.topic, partition: t.partition, leader: t.leader, records: [] }
      group.records.push({ index, key: request.key, headers: recordHeaders(request), payload: request.payload })
      groups.set(slot, group)
    })
    return groups
  })

/**
 * Replaces the producer when a topic it once sent to (outside this call) was deleted since:
 * kafkajs's metadata refreshes would fail until then. Checked at most once a second.
 */
const forgetDeletedTopics = (admin: Kafkajs.Admin, sender: Send.Sender) => {
  let verifiedAt = 0
  return (callTopics: ReadonlySet<string>) =>
    Effect.gen(function* () {
      const others = [...sender.targeted].filter((t) => !callTopics.has(t))
      if (others.length === 0 || Date.now() - verifiedAt <= 1_000) return
      verifiedAt = Date.now()
      const names = yield* Effect.tryPromise(() => admin.listTopics()).pipe(Effect.orElseSucceed(() => undefined))
      if (names !== undefined && others.some((t) => !names.includes(t))) sender.leases.requestReset()
    })
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaPublisherOptions = {}): Layer.Layer<Publisher, never, KafkaClient> =>
  Layer.effect(Publisher)(make(options))
