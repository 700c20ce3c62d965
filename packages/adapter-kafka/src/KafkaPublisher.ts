/**
 * `Publisher` on kafkajs (R1.2–R1.5): an idempotent producer, explicit partitions, and a receipt
 * per record in request order. Each partition's records go in record batches under the topic's
 * `max.message.bytes`, one `sendBatch` per batch, so every broker error is attributed to the
 * records it concerns (review C1).
 *
 * @since 0.1.0
 */
import {
  BrokerUnavailableError,
  PermanentPublishError,
  type PublishError,
  RetriablePublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER } from "@effect-outbox/core/OutboxMessage"
import * as PartitionSend from "@effect-outbox/core/PartitionSend"
import * as ProducerLeases from "@effect-outbox/core/ProducerLeases"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import type * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import Kafkajs from "kafkajs"
import * as TopicLimits from "./internal/topicLimits.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, isRecordSizeError, requiresProducerReset, rootCause, toPublishError } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaPublisherOptions {
  /**
   * Upper bound on one publish call, retries included (default 8000). A partition batch that runs
   * out reports `BrokerUnavailableError` for its records: they may or may not have landed (R3.2).
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

interface TopicLayout {
  readonly partitions: ReadonlyArray<Kafkajs.PartitionMetadata>
  readonly fetchedAt: number
}

type Target =
  | { readonly _tag: "Send"; readonly topic: string; readonly partition: number }
  | { readonly _tag: "Reject"; readonly error: PublishError }

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** A record of a call, with the headers it is sent with and its place in the call. */
interface Outgoing extends RecordSize.SizedRecord {
  readonly index: number
}

/** A failed send whose verdict is already decided. */
class SendError {
  readonly verdict: PublishError
  constructor(verdict: PublishError) {
    this.verdict = verdict
  }
}

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
    const maxAge = options.metadataMaxAgeMillis ?? 5_000
    const timeoutMillis = options.publishTimeoutMillis ?? 8_000
    const maxInFlightRequests = Math.min(5, Math.max(1, options.maxInFlightRequests ?? 5))
    // Keyed records without an explicit partition get the Java client's murmur2 partition, so
    // the same key lands where other Kafka clients would put it; we compute it ourselves to
    // know every record's partition before sending.
    const partitioner = Kafkajs.Partitioners.DefaultPartitioner()
    const layouts = new Map<string, TopicLayout>()

    // One producer at a time; replaced (fresh producer id) after an uncertain failure, see
    // KafkaErrors.requiresProducerReset, and after a topic grew (kafkajs would otherwise drop
    // records for partitions its cached metadata lacks). Sends hold it by reference (M5).
    // kafkajs refreshes metadata for every topic a producer ever sent to, and once one of them
    // is deleted every refresh fails (UNKNOWN_TOPIC_OR_PARTITION) until the producer is
    // replaced. So we remember those topics and check they still exist, at most once a second.
    const targeted = new Set<string>()
    let targetsVerifiedAt = 0
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
    const limits = TopicLimits.make(client.admin)
    const uncompressed = options.compression === undefined || options.compression === Kafkajs.CompressionTypes.None

    const fetchLayout = (topic: string) =>
      Effect.tryPromise({
        try: () => client.admin.fetchTopicMetadata({ topics: [topic] }),
        catch: (error) => error
      }).pipe(
        Effect.map((metadata) => {
          const found = metadata.topics.find((t) => t.name === topic)
          if (found === undefined) return undefined
          const layout: TopicLayout = {
            partitions: [...found.partitions].sort((a, b) => a.partitionId - b.partitionId),
            fetchedAt: Date.now()
          }
          const previous = layouts.get(topic)
          // The producer's own metadata may predate the growth: replace it.
          if (previous !== undefined && previous.partitions.length < layout.partitions.length) leases.requestReset()
          layouts.set(topic, layout)
          return layout
        }),
        Effect.catch((error) =>
          rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION"
            ? Effect.sync(() => {
                layouts.delete(topic)
                return undefined
              })
            : Effect.fail(error)
        )
      )

    /** Cached layout unless stale, or unless some request targets a partition it lacks. */
    const layoutFor = (topic: string, requests: ReadonlyArray<PublishRequest>) => {
      const cached = layouts.get(topic)
      const wanted = requests.reduce(
        (max, r) => (r.topic === topic && r.partition !== null ? Math.max(max, r.partition) : max),
        -1
      )
      return cached !== undefined && Date.now() - cached.fetchedAt < maxAge && wanted < cached.partitions.length
        ? Effect.succeed(cached)
        : fetchLayout(topic)
    }

    const target = (request: PublishRequest, layout: TopicLayout | undefined): Target => {
      if (layout === undefined) {
        return {
          _tag: "Reject",
          error: new PermanentPublishError({
            topic: request.topic,
            reason:
              "the topic does not exist on the broker (automatic topic creation is off: create it with BrokerAdmin.ensureTopic)"
          })
        }
      }
      const count = layout.partitions.length
      if (request.partition !== null) {
        return Number.isInteger(request.partition) && request.partition >= 0 && request.partition < count
          ? { _tag: "Send", topic: request.topic, partition: request.partition }
          : {
              _tag: "Reject",
              error: new UnknownPartitionError({
                topic: request.topic,
                partition: request.partition,
                partitionCount: count
              })
            }
      }
      const partition = partitioner({
        topic: request.topic,
        partitionMetadata: [...layout.partitions],
        message: { key: request.key, value: null }
      })
      return { _tag: "Send", topic: request.topic, partition }
    }

    /** Records of one call bound for one partition, in request order. */
    interface PartitionGroup {
      readonly topic: string
      readonly partition: number
      readonly records: Array<Outgoing>
    }

    // One partition's records, in record batches under the topic's limit (core PartitionSend).
    const sendPartition = (group: PartitionGroup, deadline: number, outcomes: Array<PublishOutcome | undefined>) =>
      PartitionSend.sendPartition(
        {
          limitFor: limits.limitFor,
          invalidateLimit: limits.invalidate,
          send: (topic, partition, batch) => sendRecords(topic, partition, batch, deadline),
          isRecordSizeError: (error) => !(error instanceof SendError) && isRecordSizeError(error),
          verdict: (topic, error) => (error instanceof SendError ? error.verdict : toPublishError(topic, error)),
          describe,
          uncompressed,
          onSent: (records) => Metric.update(publishedRecords, records)
        },
        group.topic,
        group.partition,
        group.records,
        outcomes
      )

    /**
     * One `sendBatch` of records for one partition: the base offset they were appended at, or
     * the error (a `SendError` when we already know its verdict).
     */
    const sendRecords = (topic: string, partition: number, batch: ReadonlyArray<Outgoing>, deadline: number) => {
      const sendOnce = Effect.flatMap(leases.acquire, (lease) => {
        targeted.add(topic)
        const sending = lease.producer.sendBatch({
          acks: -1,
          ...(options.compression === undefined ? {} : { compression: options.compression }),
          topicMessages: [
            {
              topic,
              messages: batch.map((record) => ({
                key: record.key,
                value: toBuffer(record.payload),
                partition,
                headers: { ...record.headers }
              }))
            }
          ]
        })
        // The producer goes back when the send settles, not when we stop waiting for it: a reset
        // meanwhile must not disconnect it under the send (M5).
        void sending.then(lease.release, lease.release)
        return Effect.tryPromise({ try: () => sending, catch: (error) => error })
      })
      const timeout = Math.max(1, deadline - Date.now())
      return sendOnce.pipe(
        // Interrupted (a caller's timeout): the send may still land; never reuse this producer.
        Effect.onInterrupt(() => Effect.sync(leases.requestReset)),
        // Our metadata says the topic exists, so an unknown topic is some other topic this
        // producer once used and that was deleted since: replace the producer, try again.
        Effect.catchIf(
          (error) => rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION",
          () =>
            Effect.suspend(() => {
              leases.requestReset()
              return sendOnce
            })
        ),
        Effect.timeoutOrElse({
          duration: timeout,
          // A broker that does not answer in time is unavailable (a frozen broker, a lost
          // network): retried without counting an attempt; the records may have landed.
          orElse: () =>
            Effect.fail(
              new SendError(
                new BrokerUnavailableError({
                  topic,
                  reason: `no acknowledgement within ${timeoutMillis} ms; the records may have reached the broker`
                })
              )
            )
        }),
        Effect.flatMap((metadata) => {
          const found = metadata.find((m) => m.topicName === topic && m.partition === partition)
          if (found !== undefined && found.errorCode === 0 && found.baseOffset !== undefined)
            return Effect.succeed(BigInt(found.baseOffset))
          // kafkajs's metadata did not know this partition and skipped it: nothing was sent.
          leases.requestReset()
          return Effect.fail(
            new SendError(
              new RetriablePublishError({
                topic,
                reason: `the producer had no metadata for partition ${partition}; it is being refreshed`
              })
            )
          )
        }),
        Effect.catch((error) =>
          Effect.gen(function* () {
            if (error instanceof SendError) return yield* Effect.fail(error)
            if (requiresProducerReset(error)) leases.requestReset()
            // An unknown topic after our check said it exists: it was deleted a moment ago (the
            // cached layout is stale). Re-read, and report a topic that is really gone as permanent.
            if (rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION") {
              const fresh = yield* fetchLayout(topic).pipe(Effect.orElseSucceed(() => null))
              if (fresh === undefined) {
                return yield* Effect.fail(
                  new SendError(
                    new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" })
                  )
                )
              }
            }
            return yield* Effect.fail(error)
          })
        ),
        Effect.result
      )
    }

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
        const deadline = Date.now() + timeoutMillis
        const topics = [...new Set(requests.map((r) => r.topic))]
        const outcomes: Array<PublishOutcome | undefined> = new Array(requests.length)

        // 1. Where does each record go? Decided before sending, because kafkajs silently drops
        //    records for a partition its metadata lacks.
        const targets: Array<Target> = new Array(requests.length)
        for (const topic of topics) {
          const layout = yield* layoutFor(topic, requests).pipe(Effect.result)
          requests.forEach((request, i) => {
            if (request.topic !== topic) return
            targets[i] = Result.isFailure(layout)
              ? { _tag: "Reject", error: toPublishError(topic, layout.failure) }
              : target(request, layout.success)
          })
        }

        // 2. Records grouped by partition, request order kept within each.
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
        if (groups.size === 0) return outcomes as ReadonlyArray<PublishOutcome>

        const callTopics = new Set([...groups.values()].map((g) => g.topic))
        const others = [...targeted].filter((t) => !callTopics.has(t))
        if (others.length > 0 && Date.now() - targetsVerifiedAt > 1_000) {
          targetsVerifiedAt = Date.now()
          const names = yield* Effect.tryPromise(() => client.admin.listTopics()).pipe(
            Effect.orElseSucceed(() => undefined)
          )
          if (names !== undefined && others.some((t) => !names.includes(t))) leases.requestReset()
        }

        // 3. Partitions in parallel (kafkajs pipelines them per broker), each in order.
        yield* Effect.forEach(groups.values(), (group) => sendPartition(group, deadline, outcomes), {
          concurrency: "unbounded",
          discard: true
        })
        return outcomes as ReadonlyArray<PublishOutcome>
      }).pipe(Effect.withSpan("kafka.publish", { attributes: { records: requests.length } }))

    return Publisher.of({ publish })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaPublisherOptions = {}): Layer.Layer<Publisher, never, KafkaClient> =>
  Layer.effect(Publisher)(make(options))
