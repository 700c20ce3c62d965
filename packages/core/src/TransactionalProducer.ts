/**
 * The Kafka-transaction port of the exactly-once mode: records to several partitions and a
 * consumer group's offsets commit in ONE Kafka transaction — all become visible to
 * `read_committed` consumers together with the offset commit, or none do.
 *
 * This is exactly-once only for read-process-write that stays inside Kafka. It does not cover a
 * database write, an e-mail or a payment call: for those, use `Consumer` (inbox + event id).
 *
 * adapter-kafka implements it with a kafkajs producer created with `transactionalId`,
 * `idempotent: true` and `maxInFlightRequests: 1`:
 * ```
 * const tx = await producer.transaction()
 * try {
 *   await tx.send / tx.sendBatch(records grouped by topic, with headers)
 *   await tx.sendOffsets({ consumerGroupId: groupId, topics: offsets grouped by topic })
 *   await tx.commit()
 * } catch (e) { await tx.abort(); fail TransactionAbortedError(retriable unless fenced) }
 * ```
 * and its `ConsumerSource` must read `read_committed` (kafkajs' default, `readUncommitted: false`)
 * so aborted records are never delivered downstream.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { OffsetCommit } from "./ConsumerSource.ts"
import type { TransactionAbortedError } from "./Errors.ts"
import type { PublishReceipt } from "./OutboxMessage.ts"
import type { PublishRequest } from "./Publisher.ts"

export {
  /**
   * The transaction was aborted: none of its records is visible and its offsets were not
   * committed. `retriable: false` when retrying cannot help (fenced by a newer producer with the
   * same `transactionalId`, authorisation, a record the broker refuses).
   *
   * @since 0.1.0
   * @category errors
   */
  TransactionAbortedError
} from "./Errors.ts"

/**
 * One transaction: `records` are produced and `offsets` (next offset to read, as Kafka expects)
 * are committed for `groupId`, atomically.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransactionRequest {
  readonly groupId: string
  readonly records: ReadonlyArray<PublishRequest>
  readonly offsets: ReadonlyArray<OffsetCommit>
}

/**
 * @since 0.1.0
 * @category services
 */
export class TransactionalProducer extends Context.Service<
  TransactionalProducer,
  {
    /** Stable per pipeline instance; Kafka fences older producers that reuse it. */
    readonly transactionalId: string
    /**
     * Begins, fills and commits one transaction. Succeeds with a receipt per record (request
     * order) once committed; on any failure the transaction is aborted and nothing of it is visible
     * to `read_committed` consumers nor committed.
     */
    readonly commit: (
      request: TransactionRequest
    ) => Effect.Effect<ReadonlyArray<PublishReceipt>, TransactionAbortedError>
  }
>()("@effect-outbox/core/TransactionalProducer") {}
