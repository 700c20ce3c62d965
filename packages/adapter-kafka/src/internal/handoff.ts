/**
 * kafkajs's side of the subscription (see `KafkaConsumerSource`): `eachBatch` hands each batch
 * over through the Kafka layer's `BatchHandoff` and heartbeats until it is settled; the group
 * events keep the assignment and the generation current.
 */
import type { TopicPartition } from "@effect-outbox/core/ConsumerSource"
import * as BatchHandoff from "@effect-outbox/kafka/BatchHandoff"
import { type Subscription as Committing, slotOf } from "@effect-outbox/kafka/CommitFilter"
import * as GroupSubscription from "@effect-outbox/kafka/GroupSubscription"
import { rebalanceNames } from "@effect-outbox/kafka/KafkaProtocol"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type Kafkajs from "kafkajs"
import { toConsumerError } from "../KafkaErrors.ts"
import { toConsumerRecord } from "./records.ts"

export type State = BatchHandoff.State
export const { batches, isAssigned, makeState, settleAll } = BatchHandoff
export { slotOf }

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
  // A batch of markers / aborted records only is not handed to `eachBatch`.
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload: p }) => {
    if (p.batchSize !== 0 || p.firstOffset === null || state.closed) return
    const end = BatchHandoff.skipped(state, p.topic, p.partition, BigInt(p.firstOffset), BigInt(p.lastOffset))
    if (end === undefined) return
    const slot = slotOf(p.topic, p.partition)
    consumer
      .commitOffsets([{ topic: p.topic, partition: p.partition, offset: end.toString() }])
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
    const { done, handoff } = BatchHandoff.handOver(
      state,
      {
        topic: batch.topic,
        partition: batch.partition,
        records: batch.messages.map((m) => toConsumerRecord(batch.topic, batch.partition, m))
      },
      BigInt(batch.lastOffset())
    )
    // Keep the membership alive while the stream works on the batch. A heartbeat that reports a
    // rebalance is not fatal: the member rejoins once this callback returns.
    const timer = setInterval(() => {
      heartbeat().catch((error) => {
        if (isRebalancing(error)) BatchHandoff.rebalancing(state, handoff)
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

/** How this subscription commits: `BatchHandoff.commitHooks`, sent with kafkajs's `commitOffsets`. */
export const commitHooks = (
  consumer: Kafkajs.Consumer,
  state: State
): Pick<Committing, "send" | "adjust" | "accepted"> => ({
  ...BatchHandoff.commitHooks(state),
  send: (commits) =>
    consumer.commitOffsets(commits.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset })))
})
