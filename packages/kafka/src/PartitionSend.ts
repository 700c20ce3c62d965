/**
 * How a Kafka publisher sends one partition's records, for any client:
 * in record batches under the topic's `max.message.bytes`, one after the other (a batch starts
 * only after the previous one was acknowledged, so a younger record of a key never overtakes an
 * older one), each its own request, so every error concerns exactly the records it was about.
 *
 * - A record too large on its own fails permanently; younger records of its key in this call are
 *   handed back unsent (retriable), its neighbours go on.
 * - A size error on a batch of several records (the broker's limit is below what we sized by)
 *   re-reads the limit and sends the batch in halves.
 * - Any other error concerns the partition: the batch gets its verdict and the rest of the
 *   partition is not sent (an outage gives every remaining record the outage's verdict).
 *
 * Each Kafka driver (kafkajs, @platformatic/kafka) supplies the client side as a {@link Driver}.
 *
 * @since 0.1.0
 */

import { PermanentPublishError, type PublishError, RetriablePublishError } from "@effect-outbox/core/Errors"
import type { PublishOutcome } from "@effect-outbox/core/Publisher"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Receipts from "./internal/receipts.ts"

/**
 * A record of a publish call: its size inputs and its position in the call's requests.
 *
 * @since 0.1.0
 * @category models
 */
export interface IndexedRecord extends RecordSize.SizedRecord {
  readonly index: number
}

/**
 * The client side of {@link sendPartition}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Driver<R extends IndexedRecord> {
  /** The topic's `max.message.bytes` as last read. */
  readonly limitFor: (topic: string) => Effect.Effect<number>
  /** Forgets the cached limit, so the next `limitFor` asks the broker. */
  readonly invalidateLimit: (topic: string) => Effect.Effect<void>
  /** Sends one record batch: the offset its first record was appended at, or the client's error. */
  readonly send: (
    topic: string,
    partition: number,
    batch: ReadonlyArray<R>
  ) => Effect.Effect<Result.Result<bigint, unknown>>
  readonly isRecordSizeError: (error: unknown) => boolean
  /** The library's verdict on an error of `send`. */
  readonly verdict: (topic: string, error: unknown) => PublishError
  readonly describe: (error: unknown) => string
  /** Without compression a batch's size is exact, so a record that cannot fit alone is not sent. */
  readonly uncompressed: boolean
  /** Called with the number of records of each acknowledged batch (a metric). */
  readonly onSent: (records: number) => Effect.Effect<void>
}

/**
 * Sends `records` (one partition's, in order) and writes each one's outcome at its `index`.
 *
 * @since 0.1.0
 * @category sending
 */
export const sendPartition = <R extends IndexedRecord>(
  driver: Driver<R>,
  topic: string,
  partition: number,
  records: ReadonlyArray<R>,
  outcomes: Array<PublishOutcome | undefined>
): Effect.Effect<void> =>
  Effect.gen(function* () {
    let limit = yield* driver.limitFor(topic)
    const queue = RecordSize.splitByBatchBytes(records, limit)
    // Keys with a record that failed for its own sake: their younger records are not sent.
    const failedKeys = new Set<string>()
    const notSent = (record: R, why: string) => {
      outcomes[record.index] = Result.fail(new RetriablePublishError({ topic, reason: `not sent: ${why}` }))
    }
    const tooLarge = (record: R, reason: string) => {
      outcomes[record.index] = Result.fail(new PermanentPublishError({ topic, reason }))
      if (record.key !== null) failedKeys.add(record.key)
    }
    while (queue.length > 0) {
      const batch = queue.shift()!.filter((record) => {
        if (record.key === null || !failedKeys.has(record.key)) return true
        notSent(record, `an older record of key ${record.key} failed in this call`)
        return false
      })
      if (batch.length === 0) continue
      const single = batch.length === 1 ? batch[0]! : undefined
      if (single !== undefined && driver.uncompressed && RecordSize.singleRecordBatchBytes(single) > limit) {
        tooLarge(single, RecordSize.describeTooLarge(single, limit))
        continue
      }
      const sent = yield* driver.send(topic, partition, batch)
      if (Result.isSuccess(sent)) {
        Receipts.write(outcomes, topic, partition, sent.success, batch)
        yield* driver.onSent(batch.length)
        continue
      }
      const error = sent.failure
      if (driver.isRecordSizeError(error)) {
        // The broker's limit is below what we sized by (the topic's setting changed, or the
        // broker's own limit is lower): re-read it and send the batch in halves.
        yield* driver.invalidateLimit(topic)
        limit = Math.min(limit, yield* driver.limitFor(topic))
        if (single === undefined) {
          const half = Math.ceil(batch.length / 2)
          queue.unshift(batch.slice(0, half), batch.slice(half))
          continue
        }
        tooLarge(single, `${driver.describe(error)}; ${RecordSize.describeTooLarge(single, limit)}`)
        continue
      }
      // Any other error concerns the partition: this batch failed, the rest is not sent.
      const verdict = driver.verdict(topic, error)
      for (const record of batch) outcomes[record.index] = Result.fail(verdict)
      for (const record of queue.flat()) {
        if (verdict._tag === "BrokerUnavailableError") outcomes[record.index] = Result.fail(verdict)
        else notSent(record, `an older record batch of partition ${partition} failed (${verdict.message})`)
      }
      yield* Effect.logDebug(`kafka publish to ${topic}/${partition} failed: ${verdict.message}`)
      return
    }
  })
