/**
 * The subscription's shared state and the path of records from the client's stream to the
 * core's batches: one partition per batch, records of paused partitions held back in the adapter
 * (the client pauses only its whole stream, which it does when too many wait), and the
 * generation that tells whether a batch is still current.
 *
 * @internal
 */
import type { ConsumerBatch, GroupMetadata, TopicPartition } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { slotOf } from "@effect-outbox/kafka/CommitFilter"
import * as GroupSubscription from "@effect-outbox/kafka/GroupSubscription"
import * as HeldBatches from "@effect-outbox/kafka/HeldBatches"
import type { Consumer, MessagesStream } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import { toConsumerError } from "../PlatformaticErrors.ts"
import { type RawMessage, toConsumerRecord } from "./records.ts"

export type AnyConsumer = Consumer<Buffer, Buffer, Buffer, Buffer>
export type RawStream = MessagesStream<Buffer, Buffer, Buffer, Buffer>

/** What the group events, the stream, `commit` and `pause` share; mutated in place. */
export interface State extends GroupSubscription.State, HeldBatches.State<RawMessage> {
  /** The consumer's group generation at its last join; it differs from the current one while a join runs. */
  joinedGenerationId: number | undefined
  /** The group generation and member id each batch's records were fetched under. */
  readonly batchGroup: WeakMap<ConsumerBatch, GroupMetadata>
}

export { slotOf }

/**
 * Fresh state, its generation counting the consumer's group joins from now on: after one, the
 * stream restarts every assigned partition at the group's committed offset, so batches read
 * before it are not current any more.
 */
export const makeState = (consumer: AnyConsumer): State => {
  const state: State = {
    ...GroupSubscription.makeState(),
    held: new Map(),
    heldCount: 0,
    joinedGenerationId: undefined,
    batchGroup: new WeakMap(),
    failure: undefined,
    wake: undefined
  }
  consumer.on("consumer:group:join", () => {
    state.generation++
    state.joinedGenerationId = consumer.generationId
    state.held.clear()
    state.heldCount = 0
  })
  return state
}

export const { notify } = HeldBatches

export const owns = (consumer: AnyConsumer, topic: string, partition: number) =>
  consumer.assignments?.some((a) => a.topic === topic && a.partitions.includes(partition)) === true

/**
 * Whether a batch's records were fetched under the consumer's present group generation: records
 * fetched before a join may wait in the stream's buffer and be read after it.
 */
export const fetchedByThisMember =
  (consumer: AnyConsumer, state: State) =>
  (batch: ConsumerBatch): boolean =>
    (state.batchGroup.get(batch)?.generationId ?? consumer.generationId) === consumer.generationId

export const setPaused = (state: State, partitions: ReadonlyArray<TopicPartition>, paused: boolean) =>
  Effect.sync(() => {
    GroupSubscription.markPaused(state, partitions, paused)
    // A pull waiting for records may now take the held ones.
    if (!paused) notify(state)
  })

/** The membership the client stamped on a message when its fetch was answered. */
const membershipOf = (message: RawMessage) =>
  (
    message.metadata as
      | { readonly consumer?: { readonly generationId?: number; readonly memberId?: string | null } }
      | undefined
  )?.consumer

/**
 * Whether two messages were fetched under one membership. A batch never spans two: the stream's
 * buffer still holds records fetched before a group join when the records the join fetched again
 * from the committed offset arrive behind them, and a batch stamped with its first (old) record's
 * generation would drop the new records with the old ones, though the stream has moved past them.
 */
const sameMembership = (a: RawMessage, b: RawMessage): boolean => {
  const x = membershipOf(a)
  const y = membershipOf(b)
  return x?.generationId === y?.generationId && x?.memberId === y?.memberId
}

/** Reads one-partition batches off the stream, holding back records of paused partitions. */
export const reader = (stream: RawStream, state: State, maxBatch: number, maxHeld: number) =>
  HeldBatches.reader(state, {
    read: () => (stream.read() as RawMessage | null) ?? undefined,
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    sameRun: sameMembership,
    toBatch: (messages) => {
      const batch: ConsumerBatch = {
        topic: messages[0]!.topic,
        partition: messages[0]!.partition,
        records: messages.map(toConsumerRecord)
      }
      state.fetchedIn.set(batch, state.generation)
      const member = membershipOf(messages[0]!)
      if (typeof member?.generationId === "number" && typeof member.memberId === "string") {
        state.batchGroup.set(batch, { generationId: member.generationId, memberId: member.memberId })
      }
      return batch
    },
    maxBatch,
    maxHeld
  })

/** The subscription's batches; listens to the stream from now on. */
export const batches = (
  stream: RawStream,
  state: State,
  limits: { readonly maxBatch: number; readonly maxHeld: number }
): Stream.Stream<ConsumerBatch, ConsumerSourceError> => {
  const readBatch = reader(stream, state, limits.maxBatch, limits.maxHeld)
  // The stream fetches only while someone listens for 'readable' (with no listener its
  // `readableFlowing` goes back to null and its fetch loop stops for good), so one listener
  // stays attached for the subscription's life and wakes the pull that waits.
  let ended = false
  stream.on("readable", () => notify(state))
  stream.on("error", (error: unknown) => {
    state.failure ??= toConsumerError("consume", error)
    notify(state)
  })
  stream.on("close", () => {
    ended = true
    notify(state)
  })
  return HeldBatches.pulls(state, readBatch, () => ended || stream.destroyed)
}
