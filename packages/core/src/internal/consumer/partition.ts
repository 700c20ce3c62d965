/**
 * One assigned partition: its queue of fetched batches, which delivered offsets are not finished
 * yet, what it committed, and its parked keys. Offsets are committed only up to the highest offset
 * below which every record finished.
 */
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Semaphore from "effect/Semaphore"
import type { ConsumerBatch, ConsumerRecord, Subscription } from "../../ConsumerSource.ts"

export interface PartitionState {
  readonly topic: string
  readonly partition: number
  readonly queue: Queue.Queue<ConsumerBatch, Cause.Done>
  /**
   * Held by the worker for a whole batch; a release takes it only for a moment (its commit, its
   * last look at the parked store), never while it runs records.
   */
  readonly lock: Semaphore.Semaphore
  /** One lock per key a release runs for: releases of one key run one at a time. */
  readonly keyLocks: Map<string, KeyLock>
  /** Delivered offsets whose record has not finished (in flight or parked), ascending. */
  notDone: Array<bigint>
  maxDelivered: bigint
  lastCommitted: bigint
  /** Parked keys and the records waiting behind their dead-lettered head, in order. */
  readonly parked: Map<string, Array<ConsumerRecord>>
  fiber: Fiber.Fiber<void, unknown> | undefined
  /** The source was asked to stop fetching this partition: its buffer is full. */
  paused: boolean
  /** The last batch processed: while the source says it is current, this member owns the partition. */
  latest: ConsumerBatch | undefined
}

/** A key's lock and how many fibers hold or wait for it (the entry goes when none does). */
export interface KeyLock {
  readonly semaphore: Semaphore.Semaphore
  users: number
}

/**
 * Runs `effect` alone on `key` of the partition: the partition's other keys keep flowing. The
 * key's own records do not run meanwhile because the key is parked while it is released.
 */
export const withKeyLock =
  (state: PartitionState, key: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      let lock = state.keyLocks.get(key)
      if (lock === undefined) {
        lock = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
        state.keyLocks.set(key, lock)
      }
      const held = lock
      held.users++
      return held.semaphore
        .withPermits(1)(effect)
        .pipe(
          Effect.ensuring(
            Effect.sync(() => {
              if (--held.users === 0) state.keyLocks.delete(key)
            })
          )
        )
    })

export const idOf = (topic: string, partition: number): string => `${topic}\u0000${partition}`

/**
 * Notes a fetched batch's offsets as unfinished. A batch starting at or below what was delivered
 * is a rewind: the partition went to another member and came back at the group's committed
 * offset, so what this member remembered (parked records, unfinished offsets) is stale. (A forward
 * gap is normal — transaction markers, compaction — and keeps it.)
 */
export const deliver = (state: PartitionState, batch: ConsumerBatch): void => {
  const first = BigInt(batch.records[0]!.offset)
  if (first <= state.maxDelivered) {
    state.notDone = []
    state.parked.clear()
    state.maxDelivered = first - 1n
    state.lastCommitted = first
  }
  for (const record of batch.records) {
    const offset = BigInt(record.offset)
    if (!state.notDone.includes(offset)) insertSorted(state.notDone, offset)
    if (offset > state.maxDelivered) state.maxDelivered = offset
  }
}

export const markDone = (state: PartitionState, record: ConsumerRecord): void => {
  const i = state.notDone.indexOf(BigInt(record.offset))
  if (i >= 0) state.notDone.splice(i, 1)
}

/** The offset to commit next: below the first unfinished record; `undefined` when nothing moved. */
export const commitTarget = (state: PartitionState): bigint | undefined => {
  const next = state.notDone.length > 0 ? state.notDone[0]! : state.maxDelivered + 1n
  return next > state.lastCommitted ? next : undefined
}

/** Commits what finished. A lost commit only means redelivery, which the inbox absorbs. */
export const commit = (subscription: Subscription, state: PartitionState): Effect.Effect<void> =>
  Effect.suspend(() => {
    const next = commitTarget(state)
    if (next === undefined) return Effect.void
    return subscription.commit([{ topic: state.topic, partition: state.partition, offset: next.toString() }]).pipe(
      Effect.retry({ schedule: commitRetry, while: (e) => e.retriable }),
      Effect.tap(() =>
        Effect.sync(() => {
          if (next > state.lastCommitted) state.lastCommitted = next
        })
      ),
      Effect.catch((e) =>
        Effect.logWarning(`offset commit ${state.topic}/${state.partition}@${next} failed: ${e.message}`)
      )
    )
  })

const commitRetry = Schedule.exponential("200 millis").pipe(Schedule.jittered, Schedule.upTo({ times: 3 }))

/** Whether `record` must wait behind a parked head of its key. */
export const isParked = (state: PartitionState, record: ConsumerRecord): boolean =>
  record.key !== null && state.parked.has(record.key)

/** Queues `record` behind its key's parked head. */
export const park = (state: PartitionState, record: ConsumerRecord): void => {
  state.parked.get(record.key!)!.push(record)
}

/** A record of this key was dead-lettered: later records of the key wait until `release`. */
export const parkKey = (state: PartitionState, key: string): void => {
  state.parked.set(key, [])
}

/** Takes a parked key's waiting records out (for `release`); empty when the key is not parked. */
export const unpark = (state: PartitionState, key: string): ReadonlyArray<ConsumerRecord> | undefined => {
  const waiting = state.parked.get(key)
  state.parked.delete(key)
  return waiting
}

const insertSorted = (values: Array<bigint>, value: bigint) => {
  let i = values.length
  while (i > 0 && values[i - 1]! > value) i--
  values.splice(i, 0, value)
}
