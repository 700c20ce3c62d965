/**
 * `Publisher` on kafkajs (R1.2–R1.5): an idempotent producer, one `sendBatch` per publish call,
 * explicit partitions, and a receipt per record in request order.
 *
 * @since 0.1.0
 */
import {
  PermanentPublishError,
  type PublishError,
  RetriablePublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import * as Semaphore from "effect/Semaphore"
import Kafkajs from "kafkajs"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, requiresProducerReset, rootCause, toPublishError } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaPublisherOptions {
  /**
   * Upper bound on one publish call, retries included. A call that runs out reports
   * `RetriablePublishError` for its records: they may or may not have landed (R3.2).
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

/**
 * The headers sent with a record: the request's own (as given, they already carry `event-id`
 * and `traceparent`), with `event-id` guaranteed to be the request's id.
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
export const make = (options: KafkaPublisherOptions = {}) =>
  Effect.gen(function* () {
    const client = yield* KafkaClient
    const maxAge = options.metadataMaxAgeMillis ?? 5_000
    const timeoutMillis = options.publishTimeoutMillis ?? 30_000
    const maxInFlightRequests = Math.min(5, Math.max(1, options.maxInFlightRequests ?? 5))
    // Keyed records without an explicit partition get the Java client's murmur2 partition, so
    // the same key lands where other Kafka clients would put it; we compute it ourselves to
    // know every record's partition before sending.
    const partitioner = Kafkajs.Partitioners.DefaultPartitioner()
    const layouts = new Map<string, TopicLayout>()

    // One producer at a time; replaced (fresh producer id) after an uncertain failure, see
    // KafkaErrors.requiresProducerReset, and after a topic grew (kafkajs would otherwise drop
    // records for partitions its cached metadata lacks).
    let producer: Kafkajs.Producer | undefined
    let resetRequested = false
    // kafkajs refreshes metadata for every topic a producer ever sent to, and once one of them
    // is deleted every refresh fails (UNKNOWN_TOPIC_OR_PARTITION) until the producer is
    // replaced. So we remember those topics and check they still exist, at most once a second.
    const targeted = new Set<string>()
    let targetsVerifiedAt = 0
    const lock = yield* Semaphore.make(1)

    const newProducer = () =>
      client.kafka.producer({
        idempotent: true,
        maxInFlightRequests,
        allowAutoTopicCreation: false,
        // Bounded: an idempotent producer that gives up is replaced before the next send.
        retry: { retries: options.retries ?? 5, initialRetryTime: 100, maxRetryTime: 2_000 }
      })

    const disconnect = (p: Kafkajs.Producer) => Effect.promise(() => p.disconnect().catch(() => undefined))

    const acquireProducer = lock.withPermits(1)(
      Effect.gen(function* () {
        if (producer !== undefined && !resetRequested) return producer
        if (producer !== undefined) {
          const old = producer
          producer = undefined
          yield* Metric.update(producerResets, 1)
          yield* Effect.forkDetach(disconnect(old))
        }
        resetRequested = false
        targeted.clear()
        const fresh = newProducer()
        yield* Effect.tryPromise({ try: () => fresh.connect(), catch: (error) => error }).pipe(
          Effect.tapError(() => disconnect(fresh))
        )
        producer = fresh
        return fresh
      })
    )

    yield* Effect.addFinalizer(() =>
      lock.withPermits(1)(Effect.suspend(() => (producer === undefined ? Effect.void : disconnect(producer))))
    )

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
          if (previous !== undefined && previous.partitions.length < layout.partitions.length) resetRequested = true
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

    const publish = (requests: ReadonlyArray<PublishRequest>): Effect.Effect<ReadonlyArray<PublishOutcome>> =>
      Effect.gen(function* () {
        if (requests.length === 0) return []
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

        // 2. One sendBatch: records grouped by topic, request order kept within each partition.
        const byTopic = new Map<string, Array<Kafkajs.Message>>()
        const sendable: Array<number> = []
        requests.forEach((request, i) => {
          const t = targets[i]!
          if (t._tag === "Reject") {
            outcomes[i] = Result.fail(t.error)
            return
          }
          sendable.push(i)
          const messages = byTopic.get(t.topic) ?? []
          messages.push({
            key: request.key,
            value: toBuffer(request.payload),
            partition: t.partition,
            headers: recordHeaders(request)
          })
          byTopic.set(t.topic, messages)
        })
        if (sendable.length === 0) return outcomes as ReadonlyArray<PublishOutcome>

        const callTopics = new Set(byTopic.keys())
        const others = [...targeted].filter((t) => !callTopics.has(t))
        if (others.length > 0 && Date.now() - targetsVerifiedAt > 1_000) {
          targetsVerifiedAt = Date.now()
          const names = yield* Effect.tryPromise(() => client.admin.listTopics()).pipe(
            Effect.orElseSucceed(() => undefined)
          )
          if (names !== undefined && others.some((t) => !names.includes(t))) resetRequested = true
        }
        const sendOnce = acquireProducer.pipe(
          Effect.flatMap((p) => {
            for (const t of callTopics) targeted.add(t)
            return Effect.tryPromise({
              try: () =>
                p.sendBatch({
                  acks: -1,
                  ...(options.compression === undefined ? {} : { compression: options.compression }),
                  topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages }))
                }),
              catch: (error) => error
            })
          })
        )
        const sent = yield* sendOnce.pipe(
          // Interrupted (a caller's timeout): the send may still land; never reuse this producer.
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              resetRequested = true
            })
          ),
          // Our metadata says every target topic exists, so an unknown topic is some other topic
          // this producer once used and that was deleted since: replace the producer, try again.
          Effect.catchIf(
            (error) => rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION",
            () =>
              Effect.suspend(() => {
                resetRequested = true
                return sendOnce
              })
          ),
          Effect.timeoutOrElse({
            duration: timeoutMillis,
            // Retriable (KafkaErrors classifies a plain Error as permanent): a broker that does
            // not answer in time is the textbook transient failure (found by the broker-down
            // fault test).
            orElse: () =>
              Effect.fail(
                Object.assign(
                  new Error(`no acknowledgement within ${timeoutMillis} ms; the records may have reached the broker`),
                  { retriable: true }
                )
              )
          }),
          Effect.result
        )

        if (Result.isFailure(sent)) {
          const error = sent.failure
          if (requiresProducerReset(error)) resetRequested = true
          // An unknown topic after our check said it exists: it was deleted a moment ago (the
          // cached layout is stale). Re-read, and report a topic that is really gone as permanent.
          const vanished = new Set<string>()
          if (rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION") {
            for (const topic of callTopics) {
              const fresh = yield* fetchLayout(topic).pipe(Effect.orElseSucceed(() => null))
              if (fresh === undefined) vanished.add(topic)
            }
          }
          for (const i of sendable) {
            const topic = requests[i]!.topic
            outcomes[i] = Result.fail(
              vanished.has(topic)
                ? new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" })
                : toPublishError(topic, error)
            )
          }
          yield* Effect.logDebug(`kafka publish of ${sendable.length} records failed: ${describe(error)}`)
          return outcomes as ReadonlyArray<PublishOutcome>
        }

        // 3. Receipts: a partition's records were appended contiguously from its baseOffset.
        const base = new Map<string, bigint>()
        for (const meta of sent.success) {
          if (meta.errorCode === 0 && meta.baseOffset !== undefined)
            base.set(`${meta.topicName}\u0000${meta.partition}`, BigInt(meta.baseOffset))
        }
        const nextIndex = new Map<string, bigint>()
        let acknowledged = 0
        for (const i of sendable) {
          const t = targets[i] as Extract<Target, { _tag: "Send" }>
          const slot = `${t.topic}\u0000${t.partition}`
          const offset = base.get(slot)
          if (offset === undefined) {
            // kafkajs's metadata did not know this partition and skipped it: nothing was sent.
            resetRequested = true
            outcomes[i] = Result.fail(
              new RetriablePublishError({
                topic: t.topic,
                reason: `the producer had no metadata for partition ${t.partition}; it is being refreshed`
              })
            )
            continue
          }
          const index = nextIndex.get(slot) ?? 0n
          nextIndex.set(slot, index + 1n)
          const receipt: PublishReceipt = {
            topic: t.topic,
            partition: t.partition,
            offset: (offset + index).toString()
          }
          outcomes[i] = Result.succeed(receipt)
          acknowledged++
        }
        yield* Metric.update(publishedRecords, acknowledged)
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
