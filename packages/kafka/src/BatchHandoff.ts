/**
 * The hand-over of batches from a client that calls back with each fetched batch and waits (as
 * kafkajs's `eachBatch` does) to the subscription's stream: the callback hands the batch over and
 * waits for its outcome; the stream's next pull finishes the batch it handed out before, and a
 * batch the run left behind is abandoned (fetched again) unless a commit covered it. A commit at
 * the offset right after a batch's last record moves past the markers and aborted records that end
 * it (`tails`).
 *
 * @since 0.1.0
 */
import type { ConsumerBatch } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { type Subscription as Committing, slotOf } from "./CommitFilter.ts"
import * as GroupSubscription from "./GroupSubscription.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Outcome = "finished" | "abandoned"

/**
 * @since 0.1.0
 * @category models
 */
export interface Handoff {
  readonly batch: ConsumerBatch
  /** Last offset of the fetched batch (transaction markers included). */
  readonly lastOffset: bigint
  readonly settle: (outcome: Outcome) => void
  /** Taken back before the stream took it (a rebalance started): the stream skips it. */
  withdrawn: boolean
}

/**
 * What the client's callbacks, the stream and `commit` share; mutated in place.
 *
 * @since 0.1.0
 * @category models
 */
export interface State extends GroupSubscription.State {
  readonly queue: Queue.Queue<Handoff, ConsumerSourceError | Cause.Done>
  /** Batches handed over and not settled yet. */
  readonly outstanding: Set<Handoff>
  /** topic -> partitions assigned to this member in the current generation */
  assignment: Map<string, ReadonlySet<number>>
  /**
   * topic/partition -> where the latest fetched batch ends: after its last record (`records`)
   * and after its last offset of any kind (`offsets`: transaction markers, aborted records).
   */
  readonly tails: Map<string, { readonly records: bigint; offsets: bigint }>
  /**
   * The batch the stream handed out last. Pulling again in the same run means it is done with.
   * If the run ended first (`Stream.take`, a failure, an interruption) it is "stale": a commit
   * covering it still finishes it, otherwise the next pull abandons it and its records are
   * fetched again.
   */
  current: Handoff | undefined
  currentStale: boolean
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeState: Effect.Effect<State> = Effect.map(
  Queue.unbounded<Handoff, ConsumerSourceError | Cause.Done>(),
  (queue): State => ({
    ...GroupSubscription.makeState(),
    queue,
    outstanding: new Set(),
    assignment: new Map(),
    tails: new Map(),
    current: undefined,
    currentStale: false
  })
)

/**
 * @since 0.1.0
 * @category operations
 */
export const isAssigned = (state: State, topic: string, partition: number): boolean =>
  state.assignment.get(topic)?.has(partition) === true

/**
 * Settles every outstanding batch (closing: abandoned, so their positions do not move).
 *
 * @since 0.1.0
 * @category operations
 */
export const settleAll = (state: State, outcome: Outcome): void => {
  for (const handoff of state.outstanding) handoff.settle(outcome)
  state.outstanding.clear()
}

/**
 * Hands a fetched batch (never empty) to the stream: the hand-over, and its outcome once settled.
 *
 * @since 0.1.0
 * @category operations
 */
export const handOver = (
  state: State,
  batch: ConsumerBatch,
  lastOffset: bigint
): { readonly handoff: Handoff; readonly done: Promise<Outcome> } => {
  let settle!: (outcome: Outcome) => void
  const done = new Promise<Outcome>((resolve) => {
    settle = resolve
  })
  const handoff: Handoff = { batch, lastOffset, settle, withdrawn: false }
  state.fetchedIn.set(batch, state.generation)
  state.tails.set(slotOf(batch.topic, batch.partition), {
    records: BigInt(batch.records[batch.records.length - 1]!.offset) + 1n,
    offsets: lastOffset + 1n
  })
  state.outstanding.add(handoff)
  Queue.offerUnsafe(state.queue, handoff)
  return { handoff, done }
}

/**
 * A rebalance started while `handoff` was out: its generation is over, and if the stream has not
 * taken it yet it is withdrawn at once (fetched again later), so the member rejoins promptly.
 *
 * @since 0.1.0
 * @category operations
 */
export const rebalancing = (state: State, handoff: Handoff): void => {
  state.generation = Math.max(state.generation, (state.fetchedIn.get(handoff.batch) ?? 0) + 1)
  if (state.current !== handoff && !handoff.withdrawn) {
    handoff.withdrawn = true
    handoff.settle("abandoned")
  }
}

/**
 * A batch of markers or aborted records only, which the client moves past by itself: it extends
 * the tail it continues. The offset to commit past it when the group already committed up to
 * that tail and the partition is still assigned (it holds nothing to process).
 *
 * @since 0.1.0
 * @category operations
 */
export const skipped = (
  state: State,
  topic: string,
  partition: number,
  firstOffset: bigint,
  lastOffset: bigint
): bigint | undefined => {
  const slot = slotOf(topic, partition)
  const tail = state.tails.get(slot)
  const end = lastOffset + 1n
  if (tail === undefined || tail.offsets !== firstOffset || end <= tail.offsets) return undefined
  const reached = state.committed.get(slot) === tail.offsets
  tail.offsets = end
  return reached && isAssigned(state, topic, partition) ? end : undefined
}

/**
 * The batches, one per pull; a pull settles the batch pulled before it as finished.
 *
 * @since 0.1.0
 * @category constructors
 */
export const batches = (state: State): Stream.Stream<ConsumerBatch, ConsumerSourceError> => {
  const takeLive: Effect.Effect<Handoff, ConsumerSourceError | Cause.Done> = Effect.flatMap(
    Queue.take(state.queue),
    (handoff) => (handoff.withdrawn ? takeLive : Effect.succeed(handoff))
  )
  const pull = Effect.suspend(() => {
    if (state.current !== undefined) {
      state.current.settle(state.currentStale ? "abandoned" : "finished")
      state.current = undefined
    }
    return takeLive
  }).pipe(
    Effect.map((handoff) => {
      state.current = handoff
      state.currentStale = false
      return [handoff.batch] as const
    })
  )
  return Stream.fromPull(Effect.succeed(pull)).pipe(
    Stream.ensuring(
      Effect.sync(() => {
        state.currentStale = true
      })
    )
  )
}

/**
 * How this subscription commits, beyond `CommitFilter`: a commit at the offset right after a
 * batch's last record moves past the markers that end it, and a commit that covers an
 * outstanding batch finishes it, even if the stream stopped without pulling again.
 *
 * @since 0.1.0
 * @category constructors
 */
export const commitHooks = (state: State): Pick<Committing, "adjust" | "accepted"> => ({
  adjust: (requested) => {
    const tail = state.tails.get(slotOf(requested.topic, requested.partition))
    return tail !== undefined && BigInt(requested.offset) === tail.records && tail.offsets > tail.records
      ? { ...requested, offset: tail.offsets.toString() }
      : requested
  },
  accepted: (commits) => {
    for (const o of commits) {
      for (const handoff of state.outstanding) {
        const { batch } = handoff
        if (batch.topic === o.topic && batch.partition === o.partition && handoff.lastOffset < BigInt(o.offset)) {
          handoff.settle("finished")
        }
      }
    }
  }
})
