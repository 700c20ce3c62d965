/**
 * Kafka-internal exactly-once consume-transform-produce: each batch of input records is
 * transformed into output records, and the outputs and the batch's input offsets commit in one
 * Kafka transaction (`TransactionalProducer`). A crash before the commit aborts the transaction:
 * the inputs are redelivered and the outputs produced again — but the aborted ones were never
 * visible to `read_committed` consumers, so every input's outputs appear exactly once.
 *
 * The pipeline never calls the subscription's own `commit`: offsets travel in the transaction.
 * To dead-letter in this mode, return an output record to the dead-letter topic from
 * `transform`; it commits atomically with everything else.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { type ConsumerBatch, type ConsumerRecord, ConsumerSource } from "./ConsumerSource.ts"
import type { ConsumerSourceError } from "./Errors.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import { EVENT_ID_HEADER, type EventId, type Headers, isEventId, makeEventId } from "./OutboxMessage.ts"
import type { PublishRequest } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import { type TransactionAbortedError, TransactionalProducer } from "./TransactionalProducer.ts"

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
 * Processes one batch: transform every record in order, then commit outputs and the offset after
 * the batch's last record in one transaction.
 *
 * @since 0.1.0
 * @category processing
 */
export const processBatch = <E, R>(
  options: Options<E, R>,
  batch: ConsumerBatch
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
        offsets: [{ topic: batch.topic, partition: batch.partition, offset: next }]
      })
      .pipe(
        Effect.retry({
          schedule: options.retrySchedule ?? defaultRetrySchedule,
          while: (error) => error.retriable
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

/**
 * Runs the pipeline until interrupted or until a transform fails or a transaction aborts for
 * good. Batches are processed one at a time, in delivery order, so per-partition order holds.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = <E, R>(
  options: Options<E, R>
): Effect.Effect<void, E | TransactionAbortedError | ConsumerSourceError, R | ConsumerSource | TransactionalProducer> =>
  Effect.scoped(
    Effect.gen(function* () {
      const source = yield* ConsumerSource
      const subscription = yield* source.subscribe({
        groupId: options.groupId,
        topics: options.topics,
        ...(options.fromBeginning === undefined ? {} : { fromBeginning: options.fromBeginning })
      })
      yield* subscription.batches.pipe(Stream.runForEach((batch) => processBatch(options, batch)))
    })
  )
