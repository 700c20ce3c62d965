/**
 * The subscription's state and the path of a batch from kafkajs's `eachBatch` to the stream (see
 * `KafkaConsumerSource`); the group events keep the assignment and the generation current.
 */
import type { ConsumerBatch, TopicPartition } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { type Subscription as Committing, slotOf } from "@effect-outbox/kafka/CommitFilter"
import * as GroupSubscription from "@effect-outbox/kafka/GroupSubscription"
import { rebalanceNames } from "@effect-outbox/kafka/KafkaProtocol"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type Kafkajs from "kafkajs"
import { toConsumerError } from "../KafkaErrors.ts"
import { toConsumerRecord } from "./records.ts"

export type Outcome = "finished" | "abandoned"

export interface Handoff {
  readonly batch: ConsumerBatch
  /** Last offset of the fetched batch (transaction markers included). */
  readonly lastOffset: bigint
  readonly settle: (outcome: Outcome) => void
  /** Taken back before the stream took it (a rebalance started): the stream skips it. */
  withdrawn: boolean
}

/** What the kafkajs callbacks, the stream and `commit` share; mutated in place. */
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

export { slotOf }

export const isAssigned = (state: State, topic: string, partition: number): boolean =>
  state.assignment.get(topic)?.has(partition) === true

/** Settles every outstanding batch (closing: abandoned, so their positions do not move). */
export const settleAll = (state: State, outcome: Outcome): void => {
  for (const handoff of state.outstanding) handoff.settle(outcome)
  state.outstanding.clear()
}

/** The heartbeat errors that mean "the group is rebalancing: rejoin". */
const isRebalancing = (error: unknown): boolean => {
  const type = (error as { readonly type?: unknown } | null)?.type
  return typeof type === "string" && rebalanceNames.has(type)
}

/** Follows the group: joins and rebalances end the generation; a fatal crash ends the stream. */
export const watchGroup = (consumer: Kafkajs.Consumer, state: State): void => {
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    state.generation++
    state.assignment = new Map(Object.entries(payload.memberAssignment).map(([topic, ps]) => [topic, new Set(ps)]))
  })
  consumer.on(consumer.events.REBALANCING, () => {
    state.generation++
  })
  // A batch of markers / aborted records only is not handed to `eachBatch` (kafkajs moves past
  // it by itself): extend the tail it continues, and when the group already committed up to
  // that tail, commit past the batch too (it holds nothing to process).
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.batchSize !== 0 || payload.firstOffset === null || state.closed) return
    const slot = slotOf(payload.topic, payload.partition)
    const tail = state.tails.get(slot)
    if (tail === undefined || tail.offsets !== BigInt(payload.firstOffset)) return
    const end = BigInt(payload.lastOffset) + 1n
    if (end <= tail.offsets) return
    const reached = state.committed.get(slot) === tail.offsets
    tail.offsets = end
    if (!reached || !isAssigned(state, payload.topic, payload.partition)) return
    consumer
      .commitOffsets([{ topic: payload.topic, partition: payload.partition, offset: end.toString() }])
      .then(() => {
        if ((state.committed.get(slot) ?? -1n) < end) state.committed.set(slot, end)
      })
      // Only markers are at stake: the next commit of this partition covers them.
      .catch(() => undefined)
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    // kafkajs restarts by itself after retriable crashes; a crash it gives up on ends the stream.
    if (!payload.restart && !state.closed)
      Queue.failCauseUnsafe(state.queue, Cause.fail(toConsumerError("consume", payload.error)))
  })
}

/** kafkajs's `eachBatch`: hands the batch over, then heartbeats until it is settled. */
export const eachBatch =
  (state: State, heartbeatInterval: number): Kafkajs.EachBatchHandler =>
  async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
    if (state.closed || !isRunning() || isStale() || batch.messages.length === 0) return
    // Fetched before its partition was paused: fetched again after `resume`.
    if (state.paused.has(slotOf(batch.topic, batch.partition))) return
    let settle!: (outcome: Outcome) => void
    const done = new Promise<Outcome>((resolve) => {
      settle = resolve
    })
    const handoff: Handoff = {
      batch: {
        topic: batch.topic,
        partition: batch.partition,
        records: batch.messages.map((m) => toConsumerRecord(batch.topic, batch.partition, m))
      },
      lastOffset: BigInt(batch.lastOffset()),
      settle,
      withdrawn: false
    }
    state.fetchedIn.set(handoff.batch, state.generation)
    state.tails.set(slotOf(batch.topic, batch.partition), {
      records: BigInt(batch.messages[batch.messages.length - 1]!.offset) + 1n,
      offsets: handoff.lastOffset + 1n
    })
    state.outstanding.add(handoff)
    Queue.offerUnsafe(state.queue, handoff)
    // Keep the membership alive while the stream works on the batch. A heartbeat that reports a
    // rebalance is not fatal: the member rejoins once this callback returns. A batch the stream
    // has not taken yet is withdrawn at once (redelivered later), so the member rejoins
    // promptly; one it took is waited for.
    const timer = setInterval(() => {
      heartbeat().catch((error) => {
        if (!isRebalancing(error)) return
        state.generation = Math.max(state.generation, (state.fetchedIn.get(handoff.batch) ?? 0) + 1)
        if (state.current !== handoff && !handoff.withdrawn) {
          handoff.withdrawn = true
          settle("abandoned")
        }
      })
    }, heartbeatInterval)
    try {
      const outcome = await done
      if (outcome === "finished" && !state.closed) resolveOffset(batch.lastOffset())
    } finally {
      clearInterval(timer)
      state.outstanding.delete(handoff)
    }
  }

/** The batches, one per pull; a pull settles the batch pulled before it as finished. */
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

/** Pauses or resumes fetching `partitions` (a batch already fetched of a paused one is dropped). */
export const setPaused = (
  consumer: Kafkajs.Consumer,
  state: State,
  partitions: ReadonlyArray<TopicPartition>,
  pause: boolean
): Effect.Effect<void> =>
  Effect.sync(() => {
    GroupSubscription.markPaused(state, partitions, pause)
    const byTopic = new Map<string, Array<number>>()
    for (const { partition, topic } of partitions) byTopic.set(topic, [...(byTopic.get(topic) ?? []), partition])
    const request = [...byTopic].map(([topic, ps]) => ({ topic, partitions: ps }))
    try {
      if (pause) consumer.pause(request)
      else consumer.resume(request)
    } catch {
      // Not running (closing) or the topic is gone: nothing to fetch either way.
    }
  })

/**
 * How this subscription commits, beyond the Kafka layer's `CommitFilter`: a commit at the offset
 * right after a batch's last record moves past the transaction markers that end it, and a commit
 * that covers an outstanding batch finishes it.
 */
export const commitHooks = (
  consumer: Kafkajs.Consumer,
  state: State
): Pick<Committing, "send" | "adjust" | "accepted"> => ({
  // Up to the last record of the latest batch means up to its last offset: what lies
  // between (markers, aborted records) is never delivered.
  adjust: (requested) => {
    const tail = state.tails.get(slotOf(requested.topic, requested.partition))
    return tail !== undefined && BigInt(requested.offset) === tail.records && tail.offsets > tail.records
      ? { ...requested, offset: tail.offsets.toString() }
      : requested
  },
  send: (commits) =>
    consumer.commitOffsets(commits.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }))),
  // A commit covering a whole outstanding batch finishes it, even if the stream stopped
  // without pulling again (e.g. `Stream.take`).
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
