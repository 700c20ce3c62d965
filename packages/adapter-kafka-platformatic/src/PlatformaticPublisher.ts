/**
 * `Publisher` on @platformatic/kafka: an idempotent producer with acks=-1, explicit partitions and
 * a receipt per record in request order. Each partition's records go in record batches under the
 * topic's `max.message.bytes`, one `send` per batch, so every broker error is attributed to the
 * records it concerns — the same contract as the kafkajs adapter's `KafkaPublisher`.
 *
 * Keyed records without an explicit partition get the Java client's partition
 * (`murmur2(key) & 0x7fffffff`), as kafkajs computes it: the client's own default partitioner
 * (`murmur2(key) >>> 0`) would put some keys on other partitions, so switching adapters would
 * reorder those keys.
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
import { type CompressionAlgorithmValue, murmur2, ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import * as TopicLimits from "./internal/topicLimits.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import {
  describe,
  isRecordSizeError,
  isUnknownTopic,
  requiresProducerReset,
  toPublishError
} from "./PlatformaticErrors.ts"

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
 * The partition the Java client (and kafkajs) gives a key: `toPositive(murmur2(key)) % count`.
 *
 * @since 0.1.0
 * @category partitioning
 */
export const keyPartition = (key: string, partitionCount: number): number =>
  (murmur2(Buffer.from(key)) & 0x7fffffff) % partitionCount

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

type Target =
  | { readonly _tag: "Send"; readonly topic: string; readonly partition: number }
  | { readonly _tag: "Reject"; readonly error: PublishError }

interface Outgoing extends RecordSize.SizedRecord {
  readonly index: number
}

interface PartitionGroup {
  readonly topic: string
  readonly partition: number
  readonly records: Array<Outgoing>
}

/** A failed send whose verdict is already decided. */
class SendError {
  readonly verdict: PublishError
  constructor(verdict: PublishError) {
    this.verdict = verdict
  }
}

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

type AnyProducer = Producer<Buffer | undefined, Buffer, string, string>

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    const maxAge = options.metadataMaxAgeMillis ?? 5_000
    const timeoutMillis = options.publishTimeoutMillis ?? 8_000
    const layouts = new Map<string, { readonly partitions: number; readonly fetchedAt: number }>()
    const roundRobin = new Map<string, number>()

    // One producer at a time, replaced (a fresh producer id) after an uncertain failure or a
    // timeout; sends hold it by reference so a reset never closes it under them (M5).
    const leases = yield* ProducerLeases.make<AnyProducer>({
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
    const limits = TopicLimits.make(client.admin)
    const uncompressed = options.compression === undefined || options.compression === "none"

    const fetchLayout = (topic: string) =>
      Effect.tryPromise({
        try: () => client.admin.metadata({ topics: [topic], forceUpdate: true }),
        catch: (error) => error
      }).pipe(
        Effect.map((metadata) => {
          const found = metadata.topics.get(topic)
          if (found === undefined) return undefined
          const previous = layouts.get(topic)
          if (previous !== undefined && previous.partitions < found.partitionsCount) leases.requestReset()
          const layout = { partitions: found.partitionsCount, fetchedAt: Date.now() }
          layouts.set(topic, layout)
          return layout
        }),
        Effect.catch((error) =>
          isUnknownTopic(error)
            ? Effect.sync(() => {
                layouts.delete(topic)
                return undefined
              })
            : Effect.fail(error)
        )
      )

    const layoutFor = (topic: string, requests: ReadonlyArray<PublishRequest>) => {
      const cached = layouts.get(topic)
      const wanted = requests.reduce(
        (max, r) => (r.topic === topic && r.partition !== null ? Math.max(max, r.partition) : max),
        -1
      )
      return cached !== undefined && Date.now() - cached.fetchedAt < maxAge && wanted < cached.partitions
        ? Effect.succeed(cached)
        : fetchLayout(topic)
    }

    const target = (request: PublishRequest, layout: { readonly partitions: number } | undefined): Target => {
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
      const count = layout.partitions
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
      if (request.key !== null)
        return { _tag: "Send", topic: request.topic, partition: keyPartition(request.key, count) }
      const next = roundRobin.get(request.topic) ?? 0
      roundRobin.set(request.topic, next + 1)
      return { _tag: "Send", topic: request.topic, partition: next % count }
    }

    /** One `send` of one partition's records: the base offset, or the error. */
    const sendRecords = (topic: string, partition: number, batch: ReadonlyArray<Outgoing>, deadline: number) => {
      const sendOnce = Effect.flatMap(leases.acquire, (lease) => {
        const sending = (async () => {
          // The producer's cached metadata must know the partition: the client folds an unknown
          // partition onto an existing one (`partition % count`) instead of failing.
          const known = await lease.producer.metadata({ topics: [topic] })
          if ((known.topics.get(topic)?.partitionsCount ?? 0) <= partition) {
            const fresh = await lease.producer.metadata({ topics: [topic], forceUpdate: true })
            if ((fresh.topics.get(topic)?.partitionsCount ?? 0) <= partition) {
              throw new SendError(
                new RetriablePublishError({ topic, reason: `the producer's metadata lacks partition ${partition}` })
              )
            }
          }
          return lease.producer.send({
            messages: batch.map((record) => ({
              topic,
              partition,
              key: record.key === null ? undefined : Buffer.from(record.key),
              value: toBuffer(record.payload),
              headers: { ...record.headers }
            }))
          })
        })()
        // The producer goes back when the send settles, not when we stop waiting for it (M5).
        void sending.then(lease.release, lease.release)
        return Effect.tryPromise({ try: () => sending, catch: (error) => error })
      })
      return sendOnce.pipe(
        // Interrupted (a caller's timeout): the send may still land; never reuse this producer.
        Effect.onInterrupt(() => Effect.sync(leases.requestReset)),
        Effect.timeoutOrElse({
          duration: Math.max(1, deadline - Date.now()),
          // No answer in time: the broker is unavailable; the records may have landed.
          orElse: () =>
            Effect.sync(leases.requestReset).pipe(
              Effect.andThen(
                Effect.fail(
                  new SendError(
                    new BrokerUnavailableError({
                      topic,
                      reason: `no acknowledgement within ${timeoutMillis} ms; the records may have reached the broker`
                    })
                  )
                )
              )
            )
        }),
        Effect.flatMap((result) => {
          const found = result.offsets?.find((o) => o.topic === topic && o.partition === partition)
          return found === undefined
            ? Effect.fail(
                new SendError(
                  new RetriablePublishError({ topic, reason: `no offset reported for partition ${partition}` })
                )
              )
            : Effect.succeed(found.offset)
        }),
        Effect.catch((error) =>
          Effect.gen(function* () {
            if (error instanceof SendError) return yield* Effect.fail(error)
            if (requiresProducerReset(error)) leases.requestReset()
            // "Unknown topic" after our metadata said it exists: deleted a moment ago, or a broker
            // answering from stale metadata (one shutting down or starting says so too). Only a
            // fresh "no such topic" is permanent; without an answer the broker is unavailable.
            if (isUnknownTopic(error)) {
              const fresh = yield* fetchLayout(topic).pipe(Effect.orElseSucceed(() => null))
              const verdict =
                fresh === undefined
                  ? new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" })
                  : fresh === null
                    ? new BrokerUnavailableError({ topic, reason: `${describe(error)}; no metadata answer to check` })
                    : new RetriablePublishError({
                        topic,
                        reason: `${describe(error)}; the topic exists, stale metadata`
                      })
              return yield* Effect.fail(new SendError(verdict))
            }
            return yield* Effect.fail(error)
          })
        ),
        Effect.result
      )
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

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
        const deadline = Date.now() + timeoutMillis
        const topics = [...new Set(requests.map((r) => r.topic))]
        const outcomes: Array<PublishOutcome | undefined> = new Array(requests.length)
        const targets: Array<Target> = new Array(requests.length)
        for (const topic of topics) {
          const layout = yield* layoutFor(topic, requests).pipe(
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
              : target(request, layout.success)
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
export const layer = (options: PlatformaticPublisherOptions = {}): Layer.Layer<Publisher, never, PlatformaticClient> =>
  Layer.effect(Publisher)(make(options))
