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
import type { Consumer, MessagesStream } from "@platformatic/kafka"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { toConsumerError } from "../PlatformaticErrors.ts"
import { type RawMessage, toConsumerRecord } from "./records.ts"

export type AnyConsumer = Consumer<Buffer, Buffer, Buffer, Buffer>
export type RawStream = MessagesStream<Buffer, Buffer, Buffer, Buffer>

/** What the group events, the stream, `commit` and `pause` share; mutated in place. */
export interface State extends GroupSubscription.State {
  /** Records of paused partitions read from the stream, in offset order, until resumed. */
  readonly held: Map<string, Array<RawMessage>>
  heldCount: number
  /** The consumer's group generation at its last join; it differs from the current one while a join runs. */
  joinedGenerationId: number | undefined
  /** The group generation and member id each batch's records were fetched under. */
  readonly batchGroup: WeakMap<ConsumerBatch, GroupMetadata>
  /** Why the subscription cannot go on (the stream or the group failed); the next pull fails with it. */
  failure: ConsumerSourceError | undefined
  /** The pull waiting for records, if any. */
  wake: (() => void) | undefined
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

/** Wakes the pull that waits for records. */
export const notify = (state: State) => {
  const w = state.wake
  state.wake = undefined
  w?.()
}

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

/** How many of `list`'s first records (at most `max`) were fetched under the first one's membership. */
const sameFetchRun = (list: ReadonlyArray<RawMessage>, max: number): number => {
  let n = 1
  while (n < list.length && n < max && sameMembership(list[0]!, list[n]!)) n++
  return n
}

/** Reads one-partition batches off the stream, holding back records of paused partitions. */
export const reader = (stream: RawStream, state: State, maxBatch: number, maxHeld: number) => {
  // A record read from the stream that belongs to the next batch (another partition).
  let pending: RawMessage | undefined
  let streamPausedByUs = false

  const hold = (message: RawMessage) => {
    const slot = slotOf(message.topic, message.partition)
    const list = state.held.get(slot) ?? []
    list.push(message)
    state.held.set(slot, list)
    state.heldCount++
    if (state.heldCount > maxHeld && !streamPausedByUs) {
      streamPausedByUs = true
      stream.pause()
    }
  }
  const toBatch = (messages: ReadonlyArray<RawMessage>): ConsumerBatch => {
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
  }
  // Checked on every read, not only when held records are taken: a group join drops every held
  // record at once, and the stream we paused must not stay paused for want of a take.
  const resumeIfDrained = () => {
    if (streamPausedByUs && state.heldCount <= maxHeld / 2) {
      streamPausedByUs = false
      stream.resume()
    }
  }
  // A resumed partition's held records go first.
  const readHeld = (): ConsumerBatch | undefined => {
    resumeIfDrained()
    for (const [slot, list] of state.held) {
      if (state.paused.has(slot)) continue
      const taken = list.splice(0, sameFetchRun(list, maxBatch))
      if (list.length === 0) state.held.delete(slot)
      state.heldCount -= taken.length
      resumeIfDrained()
      if (taken.length > 0) return toBatch(taken)
    }
    return undefined
  }
  const next = (): RawMessage | undefined => {
    for (;;) {
      const message = pending ?? (stream.read() as RawMessage | null) ?? undefined
      pending = undefined
      if (message === undefined) return undefined
      if (!state.paused.has(slotOf(message.topic, message.partition))) return message
      hold(message)
    }
  }
  return (): ConsumerBatch | undefined => {
    const fromHeld = readHeld()
    if (fromHeld !== undefined) return fromHeld
    const first = next()
    if (first === undefined) return undefined
    const messages: Array<RawMessage> = [first]
    while (messages.length < maxBatch) {
      const message = next()
      if (message === undefined) break
      if (message.topic !== first.topic || message.partition !== first.partition || !sameMembership(first, message)) {
        pending = message
        break
      }
      messages.push(message)
    }
    return toBatch(messages)
  }
}

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

  const pull: Effect.Effect<readonly [ConsumerBatch], ConsumerSourceError | Cause.Done> = Effect.callback<
    readonly [ConsumerBatch],
    ConsumerSourceError | Cause.Done
  >((resume) => {
    const attempt = () => {
      const batch = readBatch()
      if (batch !== undefined) return resume(Effect.succeed([batch] as const))
      if (state.failure !== undefined) return resume(Effect.fail(state.failure))
      if (ended || state.closed || stream.destroyed) return resume(Cause.done())
      state.wake = attempt
    }
    attempt()
    return Effect.sync(() => {
      if (state.wake === attempt) state.wake = undefined
    })
  })
  return Stream.fromPull(Effect.succeed(pull))
}
