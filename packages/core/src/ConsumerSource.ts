/**
 * The consuming port: batches of records from a consumer group, and an explicit offset commit
 * that the consumer calls only after its database transaction committed.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { ConsumerSourceError } from "./Errors.ts"
import type { Headers } from "./OutboxMessage.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface ConsumerRecord {
  readonly topic: string
  readonly partition: number
  /** int64 offset as a decimal string. */
  readonly offset: string
  readonly key: string | null
  readonly headers: Headers
  readonly value: Uint8Array
  /** Epoch millis. */
  readonly timestamp: number
}

/**
 * Records of one partition, in offset order.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsumerBatch {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<ConsumerRecord>
}

/**
 * The offset to commit is the next offset to read (last processed + 1), as Kafka expects.
 *
 * @since 0.1.0
 * @category models
 */
export interface OffsetCommit {
  readonly topic: string
  readonly partition: number
  readonly offset: string
}

/**
 * The group membership a batch was fetched under: the group's generation and this member's id.
 * A Kafka transaction that commits offsets with them is refused by the group coordinator once the
 * member left that generation, so a member that lost a partition cannot commit beside its new
 * owner (the exactly-once pipeline's fence).
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupMetadata {
  readonly generationId: number
  readonly memberId: string
}

/**
 * One partition of a topic.
 *
 * @since 0.1.0
 * @category models
 */
export interface TopicPartition {
  readonly topic: string
  readonly partition: number
}

/**
 * A live group membership. Interrupting the stream's consumer or closing the scope leaves the
 * group cleanly; uncommitted records are redelivered to the next member.
 *
 * @since 0.1.0
 * @category models
 */
export interface Subscription {
  readonly batches: Stream.Stream<ConsumerBatch, ConsumerSourceError>
  readonly commit: (offsets: ReadonlyArray<OffsetCommit>) => Effect.Effect<void, ConsumerSourceError>
  /**
   * Whether a batch this subscription delivered still belongs to this member: `false` once its
   * partition was revoked (a rebalance, the subscription closing) since it was fetched — even if
   * the partition came back, since it then restarts at the group's committed offset. The runner
   * drops such batches before their handler runs: the partition's new owner gets them.
   */
  readonly isCurrent: (batch: ConsumerBatch) => boolean
  /**
   * The group membership this subscription delivered `batch` under, for offsets committed in a
   * Kafka transaction (`TransactionalProducer`). Absent when the source cannot tell; the
   * exactly-once pipeline refuses to run on such a source.
   */
  readonly groupMetadata?: ((batch: ConsumerBatch) => GroupMetadata | undefined) | undefined
  /**
   * Stops fetching these partitions until `resume` (batches already delivered stay valid). The
   * runner pauses a partition whose buffer is full rather than waiting on it, so one slow
   * partition never holds back the others nor the member's rejoin in a rebalance.
   */
  readonly pause: (partitions: ReadonlyArray<TopicPartition>) => Effect.Effect<void>
  readonly resume: (partitions: ReadonlyArray<TopicPartition>) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category services
 */
export class ConsumerSource extends Context.Service<
  ConsumerSource,
  {
    readonly subscribe: (options: {
      readonly groupId: string
      readonly topics: ReadonlyArray<string>
      /**
       * Where partitions WITHOUT a committed offset start: `true` (default) at their earliest
       * record; `false` at their end, which may skip records on new partitions.
       */
      readonly fromBeginning?: boolean
    }) => Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope>
  }
>()("@effect-outbox/core/ConsumerSource") {}
