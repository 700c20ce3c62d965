/**
 * Kafka-internal exactly-once consume-transform-produce: each batch of input records is
 * transformed into output records, and the outputs and the batch's input offsets commit in one
 * Kafka transaction (`TransactionalProducer`). A crash before the commit aborts the transaction:
 * the inputs are redelivered and the outputs produced again — but the aborted ones were never
 * visible to `read_committed` consumers, so every input's outputs appear exactly once.
 *
 * The pipeline never calls the subscription's own `commit`: offsets travel in the transaction.
 *
 * Fenced against rebalances: offsets are sent with the group generation and member id the batch
 * was fetched under, so the group coordinator refuses the transaction of a member that lost the
 * partition; a batch whose partition was revoked is dropped before its transaction (its new
 * owner processes it), and a newly assigned partition starts at the offset the previous owner's
 * last transaction committed. A producer or consumer source that cannot send or report the group's
 * metadata makes `run` fail at once with `TransactionalFencingError`.
 * To dead-letter in this mode, return an output record to the dead-letter topic from
 * `transform`; it commits atomically with everything else.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import {
  type ConsumerBatch,
  type ConsumerRecord,
  ConsumerSource,
  type GroupMetadata,
  type Subscription
} from "./ConsumerSource.ts"
import { type ConsumerSourceError, TransactionAbortedError, TransactionalFencingError } from "./Errors.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import { EVENT_ID_HEADER, type EventId, type Headers, isEventId, makeEventId } from "./OutboxMessage.ts"
import type { PublishRequest } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import { TransactionalProducer } from "./TransactionalProducer.ts"

/**
 * An output record. `id` becomes the request id (and should be the `event-id` header if the
 * output is an event of its own); a fresh one is generated when absent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Output {
  readonly topic: string
  readonly key: string | null
  readonly partition?: number | null
  readonly headers?: Headers
  readonly payload: Uint8Array
  readonly id?: EventId
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<E, R> {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning?: boolean
  /** Pure with respect to Kafka: it may run again for the same input after an abort. */
  readonly transform: (record: ConsumerRecord) => Effect.Effect<ReadonlyArray<Output>, E, R>
  /** Retries of retriable aborts (default exponential from 100 ms, capped at 5 s, forever). */
  readonly retrySchedule?: Schedule.Schedule<unknown, TransactionAbortedError>
}

const toRequest = (output: Output): Effect.Effect<PublishRequest> =>
  Effect.map(
    output.id !== undefined
      ? Effect.succeed(output.id)
      : output.headers?.[EVENT_ID_HEADER] !== undefined && isEventId(output.headers[EVENT_ID_HEADER])
        ? Effect.succeed(output.headers[EVENT_ID_HEADER] as EventId)
        : makeEventId,
    (id) => ({
      id,
      topic: output.topic,
      key: output.key,
      partition: output.partition ?? null,
      headers: output.headers ?? {},
      payload: output.payload
    })
  )

/**
 * The membership a batch is committed under: its group metadata, and whether its partition is
 * still this member's (a revoked batch is neither committed nor retried).
 *
 * @since 0.1.0
 * @category models
 */
export interface Membership {
  readonly group: GroupMetadata
  readonly isCurrent: () => boolean
}

/**
 * Processes one batch: transform every record in order, then commit outputs and the offset after
 * the batch's last record in one transaction. With `membership`, the offsets carry its group
 * metadata and a failed transaction is retried only while the partition is still this member's.
 *
 * @since 0.1.0
 * @category processing
 */
export const processBatch = <E, R>(
  options: Options<E, R>,
  batch: ConsumerBatch,
  membership?: Membership
): Effect.Effect<void, E | TransactionAbortedError, R | TransactionalProducer> =>
  Effect.gen(function* () {
    if (batch.records.length === 0) return
    const producer = yield* TransactionalProducer
    const outputs: Array<PublishRequest> = []
    for (const record of batch.records) {
      for (const output of yield* options.transform(record)) outputs.push(yield* toRequest(output))
    }
    const last = batch.records[batch.records.length - 1]!
    const next = (BigInt(last.offset) + 1n).toString()
    yield* producer
      .commit({
        groupId: options.groupId,
        records: outputs,
        offsets: [{ topic: batch.topic, partition: batch.partition, offset: next }],
        ...(membership === undefined ? {} : { group: membership.group })
      })
      .pipe(
        Effect.retry({
          schedule: options.retrySchedule ?? defaultRetrySchedule,
          while: (error) => error.retriable && error.groupFenced !== true && (membership?.isCurrent() ?? true)
        })
      )
  }).pipe(
    runningSpan(Telemetry.spans.transactionalBatch, {
      attributes: {
        "outbox.topic": batch.topic,
        "outbox.partition": batch.partition,
        "outbox.records": batch.records.length
      }
    })
  )

const defaultRetrySchedule: Schedule.Schedule<unknown, TransactionAbortedError> = Schedule.exponential(
  "100 millis"
).pipe(Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.seconds(5)))))

const refuse = (transactionalId: string, reason: string) =>
  Effect.fail(new TransactionalFencingError({ transactionalId, reason }))

/**
 * One member's fence: drops batches of revoked partitions and, on each partition's first batch
 * of a generation, the records the group already committed (read stable: after the previous
 * owner's last transaction).
 */
const fenced = <E, R>(
  options: Options<E, R>,
  subscription: Subscription,
  groupMetadata: (batch: ConsumerBatch) => GroupMetadata | undefined,
  committedOffset: Extract<TransactionalProducer["Service"]["fencing"], { _tag: "Group" }>["committedOffset"]
) => {
  // topic/partition -> the generation whose start was checked, and the committed offset then.
  const checked = new Map<string, { readonly generationId: number; readonly from: bigint }>()
  const drop = (batch: ConsumerBatch, why: string) =>
    Effect.logInfo("transactional pipeline: batch dropped, fetched under a membership this member no longer has").pipe(
      Effect.annotateLogs({
        topic: batch.topic,
        partition: batch.partition,
        records: batch.records.length,
        offsets: `${batch.records[0]?.offset}..${batch.records.at(-1)?.offset}`,
        why
      })
    )
  return (batch: ConsumerBatch): Effect.Effect<void, E | TransactionAbortedError, R | TransactionalProducer> =>
    Effect.gen(function* () {
      const group = groupMetadata(batch)
      if (group === undefined || !subscription.isCurrent(batch)) return yield* drop(batch, "revoked before processing")
      const slot = `${batch.topic}\u0000${batch.partition}`
      let start = checked.get(slot)
      if (start?.generationId !== group.generationId) {
        const committed = yield* committedOffset({
          groupId: options.groupId,
          topic: batch.topic,
          partition: batch.partition
        }).pipe(
          Effect.retry({
            schedule: options.retrySchedule ?? defaultRetrySchedule,
            while: (error) => error.retriable && subscription.isCurrent(batch)
          })
        )
        start = { generationId: group.generationId, from: committed === undefined ? -1n : BigInt(committed) }
        checked.set(slot, start)
      }
      const from = start.from
      const records = batch.records.filter((r) => BigInt(r.offset) >= from)
      const membership: Membership = { group, isCurrent: () => subscription.isCurrent(batch) }
      yield* processBatch(options, { ...batch, records }, membership).pipe(
        Effect.catch((error) =>
          error instanceof TransactionAbortedError && (error.groupFenced === true || !membership.isCurrent())
            ? drop(batch, error.reason)
            : Effect.fail(error)
        )
      )
    })
}

/**
 * Runs the pipeline until interrupted or until a transform fails or a transaction aborts for
 * good. Batches are processed one at a time, in delivery order, so per-partition order holds.
 * Fails at once with `TransactionalFencingError` when the producer cannot send the group's
 * metadata with offsets (kafkajs) or the consumer source does not report it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = <E, R>(
  options: Options<E, R>
): Effect.Effect<
  void,
  E | TransactionAbortedError | ConsumerSourceError | TransactionalFencingError,
  R | ConsumerSource | TransactionalProducer
> =>
  Effect.scoped(
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const fencing = producer.fencing
      if (fencing._tag === "Unsupported") return yield* refuse(producer.transactionalId, fencing.reason)
      const source = yield* ConsumerSource
      const subscription = yield* source.subscribe({
        groupId: options.groupId,
        topics: options.topics,
        ...(options.fromBeginning === undefined ? {} : { fromBeginning: options.fromBeginning })
      })
      const groupMetadata = subscription.groupMetadata
      if (groupMetadata === undefined) {
        return yield* refuse(
          producer.transactionalId,
          "the consumer source does not report the group generation its batches were fetched under"
        )
      }
      const process = fenced(options, subscription, groupMetadata, fencing.committedOffset)
      yield* subscription.batches.pipe(Stream.runForEach(process))
    })
  )
