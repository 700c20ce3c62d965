/**
 * `TransactionalProducer` on kafkajs: records and a consumer group's offsets committed in
 * one Kafka transaction (`transactionalId`, `producer.transaction()`, `sendOffsets`), through the
 * Kafka layer's `Transactions`. Pair it with `KafkaConsumerSource`, which reads
 * `read_committed`, so aborted records never reach downstream consumers.
 *
 * Verified against Apache Kafka 4.4.0 with kafkajs 2.2.4 (see docs/kafka.md): commit, abort and
 * offsets-in-transaction work; kafkajs speaks the classic (v1) transaction protocol, which
 * Kafka 4.x still serves.
 *
 * Not fenced against rebalances: kafkajs sends offsets with `TxnOffsetCommit` v1, which carries
 * no group generation or member id, so the group coordinator cannot refuse the offsets of a
 * member that lost the partition. `TransactionalPipeline.run` refuses to run on this producer
 * (`TransactionalFencingError`); use the @platformatic/kafka one. A single `commit` still works.
 *
 * @since 0.1.0
 */
import { TransactionalProducer, type TransactionRequest } from "@effect-outbox/core/TransactionalProducer"
import { recordHeaders, toBuffer } from "@effect-outbox/kafka/Publisher"
import * as Transactions from "@effect-outbox/kafka/Transactions"
import * as Layer from "effect/Layer"
import type Kafkajs from "kafkajs"
import { KafkaClient } from "./KafkaClient.ts"
import { protocol } from "./KafkaErrors.ts"

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

/** Every record's partition, decided before the transaction from fresh metadata (kafkajs drops unknown ones). */
const partitionsFor = async (admin: Kafkajs.Admin, request: TransactionRequest) => {
  const counts = new Map<string, number>()
  for (const topic of new Set(request.records.map((r) => r.topic))) {
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    counts.set(topic, metadata.topics[0]!.partitions.length)
  }
  return Transactions.partitionsFor(request, (topic) => counts.get(topic)!)
}

/** Values by topic, in order. */
const groupByTopic = <A>(items: ReadonlyArray<{ readonly topic: string; readonly value: A }>) => {
  const out = new Map<string, Array<A>>()
  for (const { topic, value } of items) out.set(topic, [...(out.get(topic) ?? []), value])
  return out
}

/** One transaction: the records, the group's offsets, then the commit (an abort on any failure). */
const run = async (admin: Kafkajs.Admin, p: Kafkajs.Producer, request: TransactionRequest) => {
  const partitions = await partitionsFor(admin, request)
  const byTopic = groupByTopic(
    request.records.map((record, i) => ({
      topic: record.topic,
      value: {
        key: record.key,
        value: toBuffer(record.payload),
        partition: partitions[i]!,
        headers: recordHeaders(record)
      }
    }))
  )
  const offsetsByTopic = groupByTopic(
    request.offsets.map((o) => ({ topic: o.topic, value: { partition: o.partition, offset: o.offset } }))
  )
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
    const offsets = sent.map((m) => ({
      topic: m.topicName,
      partition: m.partition,
      offset: BigInt(m.baseOffset ?? "0")
    }))
    return { partitions, offsets }
  } catch (error) {
    await tx.abort().catch(() => undefined)
    throw error
  }
}

/**
 * Why the pipeline cannot run fenced on kafkajs.
 *
 * @since 0.1.0
 * @category models
 */
export const kafkajsUnfenced =
  "kafkajs 2.2.4 commits offsets in a transaction with TxnOffsetCommit v1, which carries no group generation or member id: a member that lost a partition in a rebalance could commit beside its new owner. Use @effect-outbox/adapter-kafka-platformatic's TransactionalProducer for the pipeline"

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: KafkaTransactionalProducerOptions) =>
  KafkaClient.use(({ admin, kafka }) =>
    Transactions.make(
      {
        protocol,
        create: () =>
          kafka.producer({
            transactionalId: options.transactionalId,
            idempotent: true,
            maxInFlightRequests: 1,
            allowAutoTopicCreation: false,
            // Few, quick retries: a failing transaction is aborted and retried whole by the caller.
            retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1_000 },
            ...(options.transactionTimeoutMillis === undefined
              ? {}
              : { transactionTimeout: options.transactionTimeoutMillis })
          }),
        // Connecting runs InitProducerId, which also fences any older producer with this id and
        // aborts its open transaction.
        connect: (p) => p.connect(),
        close: (p) => p.disconnect(),
        run: (p, request) => run(admin, p, request),
        fencing: { unsupported: kafkajsUnfenced }
      },
      options
    )
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: KafkaTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, KafkaClient> => Layer.effect(TransactionalProducer)(make(options))
