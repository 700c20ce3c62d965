/**
 * `TransactionalProducer` on @platformatic/kafka (R7.1): records and a consumer group's offsets
 * committed in one Kafka transaction. The client speaks the whole transaction protocol:
 * `FindCoordinator` (transaction key), `InitProducerId` with the `transactionalId`,
 * `AddPartitionsToTxn` (on each `send` of a transaction), `AddOffsetsToTxn` (`addConsumer`),
 * `TxnOffsetCommit` (`addOffset`) and `EndTxn` (`commit` / `abort`).
 *
 * Offsets are committed without a group generation (`generationId` -1, no member id), as kafkajs'
 * `sendOffsets` does: the broker accepts that in a transaction whatever the group's state. The
 * client's `addOffset` wants a consumed `Message` carrying its consumer's group metadata; the
 * port hands us only `{ topic, partition, offset }`, so we build that message (the group
 * coordinator comes from the admin's `findCoordinator`).
 *
 * Pair it with `PlatformaticConsumerSource`, which reads `read_committed`.
 *
 * @since 0.1.0
 */
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import {
  TransactionAbortedError,
  TransactionalProducer,
  type TransactionRequest
} from "@effect-outbox/core/TransactionalProducer"
import {
  type Consumer,
  FindCoordinatorKeyTypes,
  type Message,
  ProduceAcks,
  Producer,
  stringSerializer
} from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Semaphore from "effect/Semaphore"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, isRetriable, isUnknownTopic, protocolTypes } from "./PlatformaticErrors.ts"
import { keyPartition, recordHeaders } from "./PlatformaticPublisher.ts"

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

/** Broker answers after which this producer may never commit again: retrying cannot help. */
const fencedTypes: ReadonlySet<string> = new Set([
  "PRODUCER_FENCED",
  "INVALID_PRODUCER_EPOCH",
  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
  "TRANSACTION_COORDINATOR_FENCED",
  "GROUP_AUTHORIZATION_FAILED"
])

/** A failure whose verdict is decided before any broker call. */
class Refused {
  readonly reason: string
  constructor(reason: string) {
    this.reason = reason
  }
}

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

type TxProducer = Producer<Buffer | undefined, Buffer, string, string>

/**
 * Every record's partition, from the producer's own metadata (refreshed when it lacks one): the
 * client folds a partition it does not know onto `partition % count` instead of failing.
 */
const partitionsFor = async (producer: TxProducer, request: TransactionRequest): Promise<Array<number>> => {
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
  const roundRobin = new Map<string, number>()
  return request.records.map((record) => {
    const count = metadata.topics.get(record.topic)?.partitionsCount ?? 0
    if (record.partition !== null) {
      if (Number.isInteger(record.partition) && record.partition >= 0 && record.partition < count) {
        return record.partition
      }
      throw new Refused(`topic ${record.topic} has no partition ${record.partition} (it has ${count})`)
    }
    if (record.key !== null) return keyPartition(record.key, count)
    const next = roundRobin.get(record.topic) ?? 0
    roundRobin.set(record.topic, next + 1)
    return next % count
  })
}

/** What the client's `addOffset` reads from a consumed message: topic, partition, offset, group. */
const offsetMessage = (groupId: string, coordinatorId: number, topic: string, partition: number, next: string) =>
  ({
    topic,
    partition,
    // The client commits `offset + 1`; the port gives the next offset to read.
    offset: BigInt(next) - 1n,
    metadata: { consumer: { groupId, coordinatorId, generationId: -1, memberId: "" } }
  }) as unknown as Message<Buffer, Buffer, Buffer, Buffer>

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticTransactionalProducerOptions) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    const { transactionalId } = options
    const commitTimeout = options.commitTimeoutMillis ?? 30_000
    const lock = yield* Semaphore.make(1)
    let producer: TxProducer | undefined

    const aborted = (reason: string, retriable: boolean) =>
      new TransactionAbortedError({ transactionalId, reason, retriable })

    const acquire = (): TxProducer => {
      producer ??= new Producer<Buffer | undefined, Buffer, string, string>({
        ...client.baseOptions,
        timeout: options.transactionTimeoutMillis ?? 10_000,
        transactionalId,
        idempotent: true,
        acks: ProduceAcks.ALL,
        autocreateTopics: false,
        repeatOnStaleMetadata: false,
        // Few retries: a failing transaction is aborted and retried whole by the caller.
        retries: 3,
        serializers: { headerKey: stringSerializer, headerValue: stringSerializer }
      })
      return producer
    }
    // The next transaction starts on a fresh producer, whose InitProducerId bumps the epoch and
    // aborts whatever this one left open. Forced: a producer stuck on a dead broker never closes.
    const reset = Effect.suspend(() => {
      const old = producer
      producer = undefined
      return old === undefined ? Effect.void : Effect.promise(() => old.close(true).catch(() => undefined))
    })
    yield* Effect.addFinalizer(() => lock.withPermits(1)(reset))

    const groupCoordinator = async (groupId: string): Promise<number> => {
      const [found] = await client.admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.GROUP, keys: [groupId] })
      if (found === undefined) throw new Error(`no coordinator for group ${groupId}`)
      return found.nodeId
    }

    const run = async (p: TxProducer, request: TransactionRequest) => {
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
          const coordinatorId = await groupCoordinator(request.groupId)
          await tx.addConsumer({ groupId: request.groupId } as Consumer)
          // One at a time: the client deduplicates concurrent calls of the same operation.
          for (const o of request.offsets) {
            await tx.addOffset(offsetMessage(request.groupId, coordinatorId, o.topic, o.partition, o.offset))
          }
        }
        await tx.commit()
        return { partitions, offsets: sent.offsets ?? [] }
      } catch (error) {
        if (!tx.completed) await tx.abort().catch(() => undefined)
        throw error
      }
    }

    const verdict = (error: unknown): TransactionAbortedError => {
      if (error instanceof Refused) return aborted(error.reason, false)
      if (isUnknownTopic(error)) return aborted(`a topic does not exist: ${describe(error)}`, false)
      const fenced = [...protocolTypes(error)].some((t) => fencedTypes.has(t))
      return aborted(describe(error), !fenced && isRetriable(error))
    }

    const commit = (
      request: TransactionRequest
    ): Effect.Effect<ReadonlyArray<PublishReceipt>, TransactionAbortedError> =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            if (request.records.length === 0 && request.offsets.length === 0) return []
            const p = acquire()
            const result = yield* Effect.tryPromise({ try: () => run(p, request), catch: (error) => error }).pipe(
              Effect.timeoutOrElse({
                duration: commitTimeout,
                orElse: () => Effect.fail(aborted(`no answer within ${commitTimeout} ms`, true))
              }),
              // Interrupted or timed out mid-transaction: never reuse this producer.
              Effect.onInterrupt(() => reset),
              // After any failure the client's transaction state is not trustworthy (a fenced
              // producer keeps failing): the next transaction gets a fresh producer.
              Effect.catch((error) =>
                Effect.andThen(reset, Effect.fail(error instanceof TransactionAbortedError ? error : verdict(error)))
              )
            )
            const base = new Map(result.offsets.map((o) => [`${o.topic}\u0000${o.partition}`, o.offset]))
            const next = new Map<string, bigint>()
            return request.records.map((record, i): PublishReceipt => {
              const slot = `${record.topic}\u0000${result.partitions[i]}`
              const index = next.get(slot) ?? 0n
              next.set(slot, index + 1n)
              return {
                topic: record.topic,
                partition: result.partitions[i]!,
                offset: ((base.get(slot) ?? 0n) + index).toString()
              }
            })
          })
        )
        .pipe(
          Effect.withSpan("kafka.transaction.commit", {
            attributes: { transactionalId, records: request.records.length }
          })
        )

    return TransactionalProducer.of({ transactionalId, commit })
  })

/**
 * `TransactionalProducer` over the shared `PlatformaticClient`. Separate from
 * `PlatformaticKafkaOutbox`: a transactional id belongs to one pipeline instance.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, PlatformaticClient> => Layer.effect(TransactionalProducer)(make(options))
