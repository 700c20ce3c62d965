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
import type { GroupMetadata, OffsetCommit } from "./ConsumerSource.ts"
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
  TransactionAbortedError,
  /**
   * The pipeline cannot be fenced against rebalances on this producer or consumer source, and
   * refuses to run.
   *
   * @since 0.1.0
   * @category errors
   */
  TransactionalFencingError
} from "./Errors.ts"

/**
 * One transaction: `records` are produced and `offsets` (next offset to read, as Kafka expects)
 * are committed for `groupId`, atomically. With `group` (the membership the input was fetched
 * under), the group coordinator refuses the offsets once that member left the generation, and
 * the whole transaction aborts.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransactionRequest {
  readonly groupId: string
  readonly records: ReadonlyArray<PublishRequest>
  readonly offsets: ReadonlyArray<OffsetCommit>
  readonly group?: GroupMetadata | undefined
}

/**
 * Whether a producer fences a consumer that lost its partitions in a rebalance.
 *
 * - `Group`: offsets carry the request's `group` and the coordinator checks them;
 *   `committedOffset` reads the group's committed offset of a partition only once no open
 *   transaction holds an offset of it (Kafka's `requireStable`), so a new owner starts after the
 *   old owner's last transaction, never before it.
 * - `Unsupported`: the client cannot send the group's metadata with offsets (`reason` says why).
 *
 * @since 0.1.0
 * @category models
 */
export type Fencing =
  | {
      readonly _tag: "Group"
      readonly committedOffset: (request: {
        readonly groupId: string
        readonly topic: string
        readonly partition: number
      }) => Effect.Effect<string | undefined, TransactionAbortedError>
    }
  | { readonly _tag: "Unsupported"; readonly reason: string }

/**
 * @since 0.1.0
 * @category services
 */
export class TransactionalProducer extends Context.Service<
  TransactionalProducer,
  {
    /** Stable per pipeline instance; Kafka fences older producers that reuse it. */
    readonly transactionalId: string
    /** How this producer fences a member that lost its partitions. */
    readonly fencing: Fencing
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
