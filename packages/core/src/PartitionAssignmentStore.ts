/**
 * The storage port of sequential partition assignment.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { StoreError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Reservation {
  readonly topic: string
  readonly ownerId: string
  readonly partition: number
  /** `false` when the owner already had this partition (the call is idempotent per owner). */
  readonly created: boolean
}

/**
 * @since 0.1.0
 * @category services
 */
export class PartitionAssignmentStore extends Context.Service<
  PartitionAssignmentStore,
  {
    /**
     * Reserves a partition for `ownerId` on `topic`: the owner's existing one, else the lowest
     * partition holding fewer than `maxPerPartition` owners, else the next partition after the
     * highest used. Atomic under concurrency: partitions are never over-filled nor skipped.
     */
    readonly reserve: (request: {
      readonly topic: string
      readonly ownerId: string
      readonly maxPerPartition: number
    }) => Effect.Effect<Reservation, StoreError>
    readonly lookup: (topic: string, ownerId: string) => Effect.Effect<Option.Option<number>, StoreError>
    /** Owners per partition, by partition number. */
    readonly counts: (topic: string) => Effect.Effect<ReadonlyMap<number, number>, StoreError>
  }
>()("@effect-outbox/core/PartitionAssignmentStore") {}
