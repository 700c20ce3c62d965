/**
 * `TransactionalProducer` on kafkajs: records and a consumer group's offsets committed in
 * one Kafka transaction (`transactionalId`, `producer.transaction()`, `sendOffsets`). Pair it
 * with `KafkaConsumerSource`, which reads `read_committed`, so aborted records never reach
 * downstream consumers.
 *
 * Verified against Apache Kafka 4.4.0 with kafkajs 2.2.4 (see docs/kafka.md): commit, abort and
 * offsets-in-transaction work; kafkajs speaks the classic (v1) transaction protocol, which
 * Kafka 4.x still serves.
 *
 * @since 0.1.0
 */

import { keyPartition } from "@effect-outbox/core/KeyPartition"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import {
  TransactionAbortedError,
  TransactionalProducer,
  type TransactionRequest
} from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Semaphore from "effect/Semaphore"
import Kafkajs from "kafkajs"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, isRetriable, rootCause } from "./KafkaErrors.ts"
import { recordHeaders } from "./KafkaPublisher.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaTransactionalProducerOptions {
  /** Stable per pipeline instance: a restarted instance with the same id fences the old one. */
  readonly transactionalId: string
  /** Broker-side transaction timeout (kafkajs default 60000 ms). */
  readonly transactionTimeoutMillis?: number | undefined
}

const fencedTypes: ReadonlySet<string> = new Set([
  "PRODUCER_FENCED",
  "INVALID_PRODUCER_EPOCH",
  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
  "TRANSACTION_COORDINATOR_FENCED"
])

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: KafkaTransactionalProducerOptions) =>
  Effect.gen(function* () {
    const { kafka, admin } = yield* KafkaClient
    const { transactionalId } = options
    const partitioner = Kafkajs.Partitioners.DefaultPartitioner()
    const lock = yield* Semaphore.make(1)
    let producer: Kafkajs.Producer | undefined

    const aborted = (reason: string, retriable: boolean) =>
      new TransactionAbortedError({ transactionalId, reason, retriable })

    const disconnect = (p: Kafkajs.Producer) => Effect.promise(() => p.disconnect().catch(() => undefined))

    // Connecting runs InitProducerId, which also fences any older producer with this id and
    // aborts its open transaction.
    const acquire = Effect.gen(function* () {
      if (producer !== undefined) return producer
      const fresh = kafka.producer({
        transactionalId,
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        // Few, quick retries: a failing transaction is aborted and retried whole by the caller.
        retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1_000 },
        ...(options.transactionTimeoutMillis === undefined
          ? {}
          : { transactionTimeout: options.transactionTimeoutMillis })
      })
      yield* Effect.tryPromise({
        try: () => fresh.connect(),
        catch: (e) => aborted(`connect: ${describe(e)}`, isRetriable(e))
      }).pipe(Effect.tapError(() => disconnect(fresh)))
      producer = fresh
      return fresh
    })
    const reset = Effect.suspend(() => {
      const old = producer
      producer = undefined
      return old === undefined ? Effect.void : disconnect(old)
    })
    yield* Effect.addFinalizer(() => lock.withPermits(1)(reset))

    const commit = (
      request: TransactionRequest
    ): Effect.Effect<ReadonlyArray<PublishReceipt>, TransactionAbortedError> =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            if (request.records.length === 0 && request.offsets.length === 0) return []
            const partitions = yield* targets(admin, partitioner, aborted, request)
            const p = yield* acquire
            const metadata = yield* Effect.tryPromise({
              try: () => send(p, request, partitions),
              catch: (error) => error
            }).pipe(
              // Interrupted mid-transaction: the next transaction starts on a fresh producer, whose
              // InitProducerId aborts the one left open.
              Effect.onInterrupt(() => reset),
              Effect.catch((error) =>
                // Whatever failed, start the next transaction on a fresh producer: kafkajs' state
                // after a failed commit or abort is not trustworthy, and a new InitProducerId is cheap.
                Effect.andThen(
                  reset,
                  Effect.fail(
                    aborted(describe(error), !fencedTypes.has(rootCause(error).type ?? "") && isRetriable(error))
                  )
                )
              )
            )
            return receiptsOf(request, partitions, metadata)
          })
        )
        .pipe(
          Effect.withSpan("kafka.transaction.commit", {
            attributes: { transactionalId, records: request.records.length }
          })
        )

    return TransactionalProducer.of({ transactionalId, commit })
  })

/** Every record's partition, decided before the transaction (kafkajs drops unknown ones). */
const targets = (
  admin: Kafkajs.Admin,
  partitioner: ReturnType<typeof Kafkajs.Partitioners.DefaultPartitioner>,
  aborted: (reason: string, retriable: boolean) => TransactionAbortedError,
  request: TransactionRequest
) =>
  Effect.gen(function* () {
    const topics = [...new Set(request.records.map((r) => r.topic))]
    const layouts = new Map<string, Array<Kafkajs.PartitionMetadata>>()
    for (const topic of topics) {
      const metadata = yield* Effect.tryPromise({
        try: () => admin.fetchTopicMetadata({ topics: [topic] }),
        catch: (e) => e
      }).pipe(
        Effect.mapError((e) =>
          rootCause(e).type === "UNKNOWN_TOPIC_OR_PARTITION"
            ? aborted(`topic ${topic} does not exist`, false)
            : aborted(`metadata of ${topic}: ${describe(e)}`, isRetriable(e))
        )
      )
      layouts.set(
        topic,
        [...metadata.topics[0]!.partitions].sort((a, b) => a.partitionId - b.partitionId)
      )
    }
    return yield* Effect.forEach(request.records, (record) => {
      const layout = layouts.get(record.topic)!
      if (record.partition === null) {
        return Effect.succeed(
          record.key !== null
            ? keyPartition(record.key, layout.length)
            : partitioner({ topic: record.topic, partitionMetadata: layout, message: { key: null, value: null } })
        )
      }
      return record.partition >= 0 && record.partition < layout.length
        ? Effect.succeed(record.partition)
        : Effect.fail(
            aborted(`topic ${record.topic} has no partition ${record.partition} (it has ${layout.length})`, false)
          )
    })
  })

/** One transaction: the records, the group's offsets, then the commit (an abort on any failure). */
const send = async (
  p: Kafkajs.Producer,
  request: TransactionRequest,
  partitions: ReadonlyArray<number>
): Promise<ReadonlyArray<Kafkajs.RecordMetadata>> => {
  const byTopic = new Map<string, Array<Kafkajs.Message>>()
  request.records.forEach((record, i) => {
    const messages = byTopic.get(record.topic) ?? []
    messages.push({
      key: record.key,
      value: toBuffer(record.payload),
      partition: partitions[i]!,
      headers: recordHeaders(record)
    })
    byTopic.set(record.topic, messages)
  })
  const offsetsByTopic = new Map<string, Array<{ partition: number; offset: string }>>()
  for (const o of request.offsets) {
    const list = offsetsByTopic.get(o.topic) ?? []
    list.push({ partition: o.partition, offset: o.offset })
    offsetsByTopic.set(o.topic, list)
  }
  const tx = await p.transaction()
  try {
    const sent =
      byTopic.size === 0
        ? []
        : await tx.sendBatch({
            acks: -1,
            topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages }))
          })
    if (offsetsByTopic.size > 0) {
      await tx.sendOffsets({
        consumerGroupId: request.groupId,
        topics: [...offsetsByTopic].map(([topic, partitions]) => ({ topic, partitions }))
      })
    }
    const missing = request.records.find(
      (r, i) => !sent.some((m) => m.topicName === r.topic && m.partition === partitions[i])
    )
    if (missing !== undefined) {
      throw Object.assign(new Error(`the producer had no metadata for a partition of ${missing.topic}`), {
        name: "KafkaJSMetadataNotLoaded"
      })
    }
    await tx.commit()
    return sent
  } catch (error) {
    await tx.abort().catch(() => undefined)
    throw error
  }
}

/** Each record's receipt: its batch's base offset plus its place among the batch's records. */
const receiptsOf = (
  request: TransactionRequest,
  partitions: ReadonlyArray<number>,
  metadata: ReadonlyArray<Kafkajs.RecordMetadata>
): ReadonlyArray<PublishReceipt> => {
  const base = new Map(metadata.map((m) => [`${m.topicName}\u0000${m.partition}`, BigInt(m.baseOffset ?? "0")]))
  const next = new Map<string, bigint>()
  return request.records.map((record, i): PublishReceipt => {
    const slot = `${record.topic}\u0000${partitions[i]}`
    const index = next.get(slot) ?? 0n
    next.set(slot, index + 1n)
    return { topic: record.topic, partition: partitions[i]!, offset: (base.get(slot)! + index).toString() }
  })
}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: KafkaTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, KafkaClient> => Layer.effect(TransactionalProducer)(make(options))
