/**
 * A consumer-group `Subscription` on any client, from the driver's hooks ({@link GroupDriver}):
 * the member is started (retried while the broker is unreachable or starting) and left when the
 * scope closes, offsets are committed through `CommitFilter`, and a batch is current while it was
 * fetched in the member's present generation from a partition the member still owns. How batches
 * are fetched and handed out, and how pausing works, stays the driver's.
 *
 * @since 0.1.0
 */
import type { ConsumerBatch, Subscription, TopicPartition } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import { retrying } from "./BrokerRetry.ts"
import * as CommitFilter from "./CommitFilter.ts"
import type { Protocol } from "./KafkaProtocol.ts"

/**
 * What the client's callbacks, the stream and `commit` share (each driver's state adds its own);
 * mutated in place.
 *
 * @since 0.1.0
 * @category models
 */
export interface State {
  closed: boolean
  /** Ends with every group join (and rebalance): batches fetched in an older one are not current. */
  generation: number
  /** The generation each batch handed out was fetched in. */
  readonly fetchedIn: WeakMap<ConsumerBatch, number>
  /** Partitions the runner paused, as `slotOf(topic, partition)`. */
  readonly paused: Set<string>
  /** `slotOf(topic, partition)` -> highest offset committed through this subscription. */
  readonly committed: Map<string, bigint>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeState = (): State => ({
  closed: false,
  generation: 0,
  fetchedIn: new WeakMap(),
  paused: new Set(),
  committed: new Map()
})

/**
 * Marks `partitions` paused (or no longer).
 *
 * @since 0.1.0
 * @category operations
 */
export const markPaused = (state: State, partitions: ReadonlyArray<TopicPartition>, pause: boolean): void => {
  for (const { partition, topic } of partitions) {
    if (pause) state.paused.add(CommitFilter.slotOf(topic, partition))
    else state.paused.delete(CommitFilter.slotOf(topic, partition))
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface GroupDriver<Started> {
  readonly protocol: Protocol
  readonly state: State
  /** Joins the group and starts fetching; retried while the error is retriable. */
  readonly start: Effect.Effect<Started, unknown>
  /** Cleans up after a start that failed for good. */
  readonly abort?: (() => Promise<unknown>) | undefined
  /** Leaves the group (`state.closed` is set before). */
  readonly close: (started: Started) => Effect.Effect<void>
  readonly batches: (started: Started) => Stream.Stream<ConsumerBatch, ConsumerSourceError>
  /** Whether this member owns the partition now. */
  readonly owns: (topic: string, partition: number) => boolean
  /** Whether a batch's records were fetched under the member's present group membership, when the client can tell. */
  readonly fetchedByThisMember?: ((batch: ConsumerBatch) => boolean) | undefined
  /** What `isCurrent` says of a batch this subscription did not hand out. */
  readonly foreignIsCurrent: boolean
  /** How offsets are sent (and adjusted, and what follows their acceptance). */
  readonly commit: Pick<CommitFilter.Subscription, "send" | "adjust" | "accepted">
  readonly setPaused: (partitions: ReadonlyArray<TopicPartition>, pause: boolean) => Effect.Effect<void>
  readonly groupMetadata?: Subscription["groupMetadata"]
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const subscribe = <Started>(
  driver: GroupDriver<Started>,
  options: { readonly groupId: string; readonly timeoutMillis: number }
): Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const { protocol, state } = driver
    const started = yield* Effect.acquireRelease(
      driver.start.pipe(
        retrying(protocol, "consumer.subscribe"),
        Effect.mapError((error) => protocol.toConsumerError("subscribe", error)),
        Effect.onError(() => Effect.promise(async () => driver.abort?.()))
      ),
      (started) =>
        Effect.suspend(() => {
          state.closed = true
          return driver.close(started)
        })
    )
    const subscription: Subscription = {
      batches: driver.batches(started),
      commit: CommitFilter.commit(
        protocol,
        { ...driver.commit, isClosed: () => state.closed, owns: driver.owns, committed: state.committed },
        options
      ),
      isCurrent: (batch) => {
        const fetched = state.fetchedIn.get(batch)
        if (fetched === undefined) return driver.foreignIsCurrent
        return (
          !state.closed &&
          fetched === state.generation &&
          (driver.fetchedByThisMember?.(batch) ?? true) &&
          driver.owns(batch.topic, batch.partition)
        )
      },
      pause: (partitions) => driver.setPaused(partitions, true),
      resume: (partitions) => driver.setPaused(partitions, false)
    }
    return driver.groupMetadata === undefined ? subscription : { ...subscription, groupMetadata: driver.groupMetadata }
  })
