/**
 * Durable per-key parking: the positions (topic, partition, offset — never payloads) of a
 * parked key's records, per consumer group, so parking survives restarts and rebalances, costs no
 * memory per record, and does not pin the partition's committed offset. The key's head is the
 * dead-lettered record; its successors wait behind it. `release` (the consumer's, or the CLI's
 * through the consumer) re-reads the records by position and runs them head first, in offset
 * order.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { ParkedLimitError, StoreError } from "./Errors.ts"

/**
 * One parked record's position.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParkedPosition {
  readonly topic: string
  readonly partition: number
  readonly key: string
  /** int64 offset as a decimal string. */
  readonly offset: string
}

/**
 * A parked key of one consumer group: its positions in offset order, the head first.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParkedKey {
  readonly consumer: string
  readonly topic: string
  readonly partition: number
  readonly key: string
  readonly offsets: ReadonlyArray<string>
  /** When the key's oldest position was parked (epoch millis), when the store knows. */
  readonly parkedAt?: number | undefined
}

/**
 * A parked key to release.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReleaseTarget {
  readonly consumer: string
  readonly topic: string
  readonly partition: number
  readonly key: string
}

export {
  /**
   * Parking more would exceed the store's bound (`maxRecords` per consumer group): release or
   * replay parked keys first. The consumer waits (retrying) rather than drop or reorder a record.
   *
   * @since 0.1.0
   * @category errors
   */
  ParkedLimitError
} from "./Errors.ts"

/**
 * The default bound on parked records per consumer group.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxRecords = 100_000

/**
 * @since 0.1.0
 * @category services
 */
export class ParkedStore extends Context.Service<
  ParkedStore,
  {
    /** Parks positions for `consumer`; idempotent per (consumer, topic, partition, offset). */
    readonly park: (
      consumer: string,
      positions: ReadonlyArray<ParkedPosition>
    ) => Effect.Effect<void, StoreError | ParkedLimitError>
    /** Parked keys, each with its offsets ascending; filtered by group, topic and partition. */
    readonly list: (filter?: {
      readonly consumer?: string | undefined
      readonly topic?: string | undefined
      readonly partition?: number | undefined
    }) => Effect.Effect<ReadonlyArray<ParkedKey>, StoreError>
    /**
     * Asks the member that owns the key's partition to release it (the CLI's way: it cannot run
     * the handler itself). The consumer polls its requests and clears each after running it.
     */
    readonly requestRelease: (target: ReleaseTarget) => Effect.Effect<void, StoreError>
    /** Pending release requests of `consumer`, oldest first. */
    readonly releaseRequests: (consumer: string) => Effect.Effect<ReadonlyArray<ReleaseTarget>, StoreError>
    readonly clearRelease: (target: ReleaseTarget) => Effect.Effect<void, StoreError>
    /** Forgets positions (processed by a release); unknown ones are ignored. */
    readonly remove: (
      consumer: string,
      positions: ReadonlyArray<Omit<ParkedPosition, "key">>
    ) => Effect.Effect<void, StoreError>
  }
>()("@effect-outbox/core/ParkedStore") {}
