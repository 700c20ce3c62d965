/**
 * One-partition batches cut from a client that hands out records one at a time and can pause only
 * as a whole: records of paused partitions are held back (the client pauses once more than
 * `maxHeld` wait, and resumes at half), a resumed partition's held records go first, and a batch
 * ends at another partition, at `maxBatch`, or where the driver's `sameRun` says (records fetched
 * under another group membership). And the pull that waits for them, woken by the client.
 *
 * @since 0.1.0
 */
import type { ConsumerBatch } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { slotOf } from "./CommitFilter.ts"
import type * as GroupSubscription from "./GroupSubscription.ts"

/**
 * What the reader and the pull share with the driver's state; mutated in place.
 *
 * @since 0.1.0
 * @category models
 */
export interface State<R> extends Pick<GroupSubscription.State, "closed" | "paused"> {
  /** Records of paused partitions read from the client, in offset order, until resumed. */
  readonly held: Map<string, Array<R>>
  heldCount: number
  /** Why the subscription cannot go on; the next pull fails with it. */
  failure: ConsumerSourceError | undefined
  /** The pull waiting for records, if any. */
  wake: (() => void) | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Source<R extends { readonly topic: string; readonly partition: number }> {
  /** The next record the client has ready, if any. */
  readonly read: () => R | undefined
  readonly pause: () => void
  readonly resume: () => void
  /** Whether two records of one partition may share a batch. */
  readonly sameRun: (first: R, next: R) => boolean
  readonly toBatch: (records: ReadonlyArray<R>) => ConsumerBatch
  readonly maxBatch: number
  readonly maxHeld: number
}

/**
 * Wakes the pull that waits for records.
 *
 * @since 0.1.0
 * @category operations
 */
export const notify = (state: Pick<State<unknown>, "wake">): void => {
  const w = state.wake
  state.wake = undefined
  w?.()
}

/**
 * A reader of one-partition batches (`undefined`: none ready), holding back records of paused
 * partitions.
 *
 * @since 0.1.0
 * @category constructors
 */
export const reader = <R extends { readonly topic: string; readonly partition: number }>(
  state: State<R>,
  source: Source<R>
): (() => ConsumerBatch | undefined) => {
  const { maxBatch, maxHeld, sameRun } = source
  // A record read from the client that belongs to the next batch (another partition).
  let pending: R | undefined
  let pausedByUs = false
  const hold = (record: R) => {
    const slot = slotOf(record.topic, record.partition)
    const list = state.held.get(slot) ?? []
    list.push(record)
    state.held.set(slot, list)
    state.heldCount++
    if (state.heldCount > maxHeld && !pausedByUs) {
      pausedByUs = true
      source.pause()
    }
  }
  // Checked on every read, not only when held records are taken: a group join drops every held
  // record at once, and the client we paused must not stay paused for want of a take.
  const resumeIfDrained = () => {
    if (pausedByUs && state.heldCount <= maxHeld / 2) {
      pausedByUs = false
      source.resume()
    }
  }
  const readHeld = (): ConsumerBatch | undefined => {
    resumeIfDrained()
    for (const [slot, list] of state.held) {
      if (state.paused.has(slot)) continue
      let n = 1
      while (n < list.length && n < maxBatch && sameRun(list[0]!, list[n]!)) n++
      const taken = list.splice(0, n)
      if (list.length === 0) state.held.delete(slot)
      state.heldCount -= taken.length
      resumeIfDrained()
      if (taken.length > 0) return source.toBatch(taken)
    }
    return undefined
  }
  const next = (): R | undefined => {
    for (;;) {
      const record = pending ?? source.read()
      pending = undefined
      if (record === undefined || !state.paused.has(slotOf(record.topic, record.partition))) return record
      hold(record)
    }
  }
  return () => {
    const fromHeld = readHeld()
    if (fromHeld !== undefined) return fromHeld
    const first = next()
    if (first === undefined) return undefined
    const records: Array<R> = [first]
    while (records.length < maxBatch) {
      const record = next()
      if (record === undefined) break
      if (record.topic !== first.topic || record.partition !== first.partition || !sameRun(first, record)) {
        pending = record
        break
      }
      records.push(record)
    }
    return source.toBatch(records)
  }
}

/**
 * The batches, one per pull: a pull reads one, fails with `state.failure`, ends when `ended`, or
 * waits for {@link notify}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const pulls = <R>(
  state: State<R>,
  readBatch: () => ConsumerBatch | undefined,
  ended: () => boolean
): Stream.Stream<ConsumerBatch, ConsumerSourceError> =>
  Stream.fromPull(
    Effect.succeed(
      Effect.callback<readonly [ConsumerBatch], ConsumerSourceError | Cause.Done>((resume) => {
        const attempt = () => {
          const batch = readBatch()
          if (batch !== undefined) return resume(Effect.succeed([batch] as const))
          if (state.failure !== undefined) return resume(Effect.fail(state.failure))
          if (ended() || state.closed) return resume(Cause.done())
          state.wake = attempt
        }
        attempt()
        return Effect.sync(() => {
          if (state.wake === attempt) state.wake = undefined
        })
      })
    )
  )
