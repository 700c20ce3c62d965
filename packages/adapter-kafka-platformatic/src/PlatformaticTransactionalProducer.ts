/**
 * `TransactionalProducer` on @platformatic/kafka: records and a consumer group's offsets
 * committed in one Kafka transaction. The client speaks the whole transaction protocol:
 * `FindCoordinator` (transaction key), `InitProducerId` with the `transactionalId`,
 * `AddPartitionsToTxn` (on each `send` of a transaction), `AddOffsetsToTxn` (`addConsumer`),
 * `TxnOffsetCommit` (`addOffset`) and `EndTxn` (`commit` / `abort`).
 *
 * Offsets are committed with the group generation and member id the input batch was fetched
 * under (`TxnOffsetCommit` v3 and later): the group coordinator refuses them once the member left
 * that generation, so a member that lost a partition in a rebalance cannot commit beside its new
 * owner. The client's `addOffset` wants a consumed `Message` carrying its consumer's group
 * metadata; the port hands us `{ topic, partition, offset }` and the request's group, so we
 * build that message (the group coordinator comes from the admin's `findCoordinator`). A new
 * owner reads its starting offset stable (`requireStable`), after the old owner's last
 * transaction.
 *
 * Pair it with `PlatformaticConsumerSource`, which reads `read_committed`.
 *
 * @since 0.1.0
 */
import type { OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import { TransactionalProducer, type TransactionRequest } from "@effect-outbox/core/TransactionalProducer"
import { recordHeaders, toBuffer } from "@effect-outbox/kafka/Publisher"
import * as Transactions from "@effect-outbox/kafka/Transactions"
import {
  type Admin,
  type Consumer,
  FindCoordinatorKeyTypes,
  type Message,
  ProduceAcks,
  Producer,
  stringSerializer
} from "@platformatic/kafka"
import * as Layer from "effect/Layer"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { protocol } from "./PlatformaticErrors.ts"

type TxProducer = Producer<Buffer | undefined, Buffer, string, string>

/**
 * Every record's partition, from the producer's own metadata (refreshed when it lacks one): the
 * client folds a partition it does not know onto `partition % count` instead of failing.
 */
const partitionsFor = async (producer: TxProducer, request: TransactionRequest) => {
  const topics = [...new Set(request.records.map((r) => r.topic))]
  if (topics.length === 0) return []
  const wanted = (topic: string) =>
    request.records.reduce(
      (max, r) => (r.topic === topic && r.partition !== null ? Math.max(max, r.partition) : max),
      -1
    )
  let metadata = await producer.metadata({ topics })
  if (topics.some((t) => (metadata.topics.get(t)?.partitionsCount ?? 0) <= wanted(t))) {
    metadata = await producer.metadata({ topics, forceUpdate: true })
  }
  return Transactions.partitionsFor(request, (topic) => metadata.topics.get(topic)?.partitionsCount ?? 0)
}

/**
 * What the client's `addOffset` reads from a consumed message: topic, partition, offset, group.
 * The group's generation and member id go to `TxnOffsetCommit`, where the coordinator refuses
 * them once the member left that generation; without them (-1, "") it accepts any offsets.
 */
const offsetMessage = (request: TransactionRequest, coordinatorId: number, offset: OffsetCommit) =>
  ({
    topic: offset.topic,
    partition: offset.partition,
    // The client commits `offset + 1`; the port gives the next offset to read.
    offset: BigInt(offset.offset) - 1n,
    metadata: {
      consumer: {
        groupId: request.groupId,
        coordinatorId,
        generationId: request.group?.generationId ?? -1,
        memberId: request.group?.memberId ?? ""
      }
    }
  }) as unknown as Message<Buffer, Buffer, Buffer, Buffer>

/**
 * The group's committed offset of a partition once no open transaction holds one
 * (`requireStable`: the broker answers UNSTABLE_OFFSET_COMMIT until then, which is retriable).
 */
export const committedOffset = async (
  admin: Admin,
  request: { readonly groupId: string; readonly topic: string; readonly partition: number }
): Promise<string | undefined> => {
  const [group] = await admin.listConsumerGroupOffsets({
    groups: [{ groupId: request.groupId, topics: [{ name: request.topic, partitionIndexes: [request.partition] }] }],
    requireStable: true
  })
  const offset = group?.topics
    .find((t) => t.name === request.topic)
    ?.partitions.find((p) => p.partitionIndex === request.partition)?.committedOffset
  // Kafka answers -1 for "no committed offset".
  return offset === undefined || offset < 0n ? undefined : offset.toString()
}

const groupCoordinator = async (admin: Admin, groupId: string): Promise<number> => {
  const [found] = await admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.GROUP, keys: [groupId] })
  if (found === undefined) throw new Error(`no coordinator for group ${groupId}`)
  return found.nodeId
}

/** Runs one transaction to its commit; a failed one is aborted (when still open) and rethrown. */
export const run = async (p: TxProducer, admin: Admin, request: TransactionRequest): Promise<Transactions.Sent> => {
  const partitions = await partitionsFor(p, request)
  // -1/-1 asks for a fresh producer id (or the current one, epoch bumped). Without it the
  // client sends 0/0, which the broker reads as "bump producer 0, epoch 0": once the
  // transactional id has a producer, every new one (a restart, our reset) is PRODUCER_FENCED.
  const tx = await p.beginTransaction({ producerId: -1n, producerEpoch: -1 })
  try {
    const sent =
      request.records.length === 0
        ? { offsets: [] }
        : await tx.send({
            messages: request.records.map((record, i) => ({
              topic: record.topic,
              partition: partitions[i]!,
              key: record.key === null ? undefined : Buffer.from(record.key),
              value: toBuffer(record.payload),
              headers: recordHeaders(record)
            }))
          })
    if (request.offsets.length > 0) {
      const coordinatorId = await groupCoordinator(admin, request.groupId)
      await tx.addConsumer({ groupId: request.groupId } as Consumer)
      // One at a time: the client deduplicates concurrent calls of the same operation.
      for (const o of request.offsets) {
        await tx.addOffset(offsetMessage(request, coordinatorId, o))
      }
    }
    await tx.commit()
    return { partitions, offsets: sent.offsets ?? [] }
  } catch (error) {
    if (!tx.completed) await tx.abort().catch(() => undefined)
    throw error
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticTransactionalProducerOptions {
  /** Stable per pipeline instance: a restarted instance with the same id fences the old one. */
  readonly transactionalId: string
  /**
   * The client sends its request timeout as the transaction timeout of `InitProducerId`, so this
   * one setting is both (default 10000; the broker aborts a transaction left open longer).
   */
  readonly transactionTimeoutMillis?: number | undefined
  /** Upper bound on one `commit`, retries included (default 30000). */
  readonly commitTimeoutMillis?: number | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticTransactionalProducerOptions) =>
  PlatformaticClient.use((client) =>
    Transactions.make(
      {
        protocol,
        create: (): TxProducer =>
          new Producer<Buffer | undefined, Buffer, string, string>({
            ...client.baseOptions,
            timeout: options.transactionTimeoutMillis ?? 10_000,
            transactionalId: options.transactionalId,
            idempotent: true,
            acks: ProduceAcks.ALL,
            autocreateTopics: false,
            repeatOnStaleMetadata: false,
            // Few retries: a failing transaction is aborted and retried whole by the caller.
            retries: 3,
            serializers: { headerKey: stringSerializer, headerValue: stringSerializer }
          }),
        // Forced: a producer stuck on a dead broker never closes.
        close: (p) => p.close(true),
        run: (p, request) => run(p, client.admin, request),
        fencing: { committedOffset: (request) => committedOffset(client.admin, request) }
      },
      { transactionalId: options.transactionalId, commitTimeoutMillis: options.commitTimeoutMillis ?? 30_000 }
    )
  )

/**
 * `TransactionalProducer` over the shared `PlatformaticClient`. Separate from
 * `PlatformaticOutbox`: a transactional id belongs to one pipeline instance.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, PlatformaticClient> => Layer.effect(TransactionalProducer)(make(options))
