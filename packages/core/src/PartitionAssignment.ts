/**
 * Sequential partition assignment: each owner of an ordered mailbox (a user) gets a
 * partition of its own topic, filled in order up to `maxPerPartition` owners, and the broker's
 * partition count grows when an assignment needs a partition it does not have yet.
 *
 * Publication then carries both `key = ownerId` and the assigned partition, so the owner's
 * events stay on one route even after the topic grew (the key alone would be re-hashed onto a
 * different partition by a larger partition count).
 *
 * Mapping and broker are kept in step by order, not by a distributed transaction: the store
 * reserves first, then the broker grows. If growing fails, `assign` fails and calling it again
 * (it is idempotent per owner) finishes the growth; a record published in between fails with
 * `UnknownPartitionError`, whose recovery path also grows the topic.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import { type BrokerAdminError, OutboxValidationError, type StoreError } from "./Errors.ts"
import { PartitionAssignmentStore } from "./PartitionAssignmentStore.ts"
import * as Telemetry from "./Telemetry.ts"

/**
 * Where an owner's events go.
 *
 * @since 0.1.0
 * @category models
 */
export interface Assignment {
  readonly topic: string
  readonly ownerId: string
  readonly partition: number
  /** The record key to publish with: the owner id itself. */
  readonly key: string
  /** `true` when this call reserved the partition (a new owner). */
  readonly created: boolean
  /** The topic's partition count after the call. */
  readonly partitionCount: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Owners per partition before the next partition is opened. */
  readonly maxPerPartition: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class PartitionAssignment extends Context.Service<
  PartitionAssignment,
  {
    /**
     * Reserves (or returns) the owner's partition on `topic`, growing the topic on the broker when
     * the partition does not exist there yet. Idempotent per owner.
     */
    readonly assign: (
      topic: string,
      ownerId: string
    ) => Effect.Effect<Assignment, StoreError | BrokerAdminError | OutboxValidationError>
    /** The owner's partition if it has one; never reserves. */
    readonly lookup: (topic: string, ownerId: string) => Effect.Effect<Option.Option<number>, StoreError>
  }
>()("@effect-outbox/core/PartitionAssignment") {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options) =>
  Effect.gen(function* () {
    const store = yield* PartitionAssignmentStore
    const admin = yield* BrokerAdmin
    if (!Number.isInteger(options.maxPerPartition) || options.maxPerPartition < 1) {
      // A configuration bug: fail loudly at layer construction.
      return yield* Effect.die(
        new OutboxValidationError({
          field: "maxPerPartition",
          reason: `must be a positive integer, got ${options.maxPerPartition}`
        })
      )
    }
    const assign = (topic: string, ownerId: string) =>
      Effect.gen(function* () {
        if (ownerId.length === 0)
          return yield* new OutboxValidationError({ field: "ownerId", reason: "must not be empty" })
        const reservation = yield* store.reserve({ topic, ownerId, maxPerPartition: options.maxPerPartition })
        const count = yield* admin.partitionCount(topic)
        let partitionCount = Option.getOrElse(count, () => 0)
        if (reservation.partition >= partitionCount) {
          // `growPartitions` never shrinks and tolerates concurrent growers, so two owners that
          // open partitions 3 and 4 at once both end up with a topic of at least 5.
          const grownTo = yield* admin.growPartitions(topic, reservation.partition + 1)
          yield* Metric.update(Telemetry.partitionsGrown, grownTo - partitionCount)
          yield* Effect.logInfo(`grew ${topic} from ${partitionCount} to ${grownTo} partitions for owner ${ownerId}`)
          partitionCount = grownTo
        }
        const assignment: Assignment = {
          topic,
          ownerId,
          partition: reservation.partition,
          key: ownerId,
          created: reservation.created,
          partitionCount
        }
        return assignment
      }).pipe(Effect.withSpan(Telemetry.spans.partitionAssign, { attributes: { topic, ownerId } }))
    return PartitionAssignment.of({ assign, lookup: store.lookup })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options
): Layer.Layer<PartitionAssignment, never, PartitionAssignmentStore | BrokerAdmin> =>
  Layer.effect(PartitionAssignment)(make(options))

/**
 * Reserves the owner's partition with the services in context (see `PartitionAssignment.assign`).
 *
 * @since 0.1.0
 * @category accessors
 */
export const assign = (topic: string, ownerId: string) => PartitionAssignment.use((s) => s.assign(topic, ownerId))
