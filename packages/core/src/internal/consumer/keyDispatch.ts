/**
 * Key-ordered concurrency inside a partition (`concurrency: { by: "key", perPartition }`).
 *
 * A fetched batch is split into one lane per key (records without a key share one lane): a
 * lane runs its records one at a time in offset order, up to `perPartition` lanes of a partition
 * at once, so a slow key holds back only its own successors. The records held in memory (queued
 * in lanes or running) are bounded by the window: once it is full the partition's worker stops
 * taking batches, its buffer fills and the source pauses the partition. Records finish out of
 * order; the partition commits up to its lowest unfinished offset (`Partition.commitTarget`), one
 * commit in flight at a time.
 *
 * Everything else is the sequential path's: a lane runs its records through `Batch.handleRecord`
 * (per-record) or `Batch.processInRounds` (per-batch: the key's records of one fetched batch in
 * one transaction), so retries, dead letters, parking and the lifecycle are unchanged; a lane
 * checks before each record that its batch is still this member's (revocation) and that the
 * consumer is not stopping. A release of a parked key runs in that key's lane.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import type { ConsumerBatch, ConsumerRecord } from "../../ConsumerSource.ts"
import type * as DeadLetter from "../../DeadLetter.ts"
import type { ConsumerSourceError, DeadLetterPublishError } from "../../Errors.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import * as Telemetry from "../../Telemetry.ts"
import * as Batch from "./batch.ts"
import type { PartitionState } from "./partition.ts"
import * as Partition from "./partition.ts"

/** What the dispatcher reads of the partition workers (`workers.ts`, which calls in here). */
interface Workers {
  readonly batch: Batch.BatchSettings
  readonly failed: Deferred.Deferred<never, ConsumerSourceError | DeadLetterPublishError>
  readonly scope: Scope.Closeable
  readonly keyed?: KeyDispatch | undefined
}

/** The resolved setting: handlers per partition and the records a partition may hold. */
export interface KeyConcurrency {
  readonly perPartition: number
  readonly maxHeld: number
}

/** The default window: enough queued records per handler that slow keys rarely stall the rest. */
export const defaultMaxHeld = (perPartition: number): number => Math.max(perPartition * 16, 256)

/** Resolves the option (`perPartition` at least 1, the window at least `perPartition`). */
export const resolve = (option: {
  readonly perPartition: number
  readonly maxHeld?: number | undefined
}): KeyConcurrency => {
  const perPartition = Math.max(1, Math.floor(option.perPartition))
  return { perPartition, maxHeld: Math.max(perPartition, Math.floor(option.maxHeld ?? defaultMaxHeld(perPartition))) }
}

/** A record waiting in its key's lane, or a release that must run alone on that key. */
type Item =
  | {
      readonly _tag: "record"
      readonly record: ConsumerRecord
      readonly batch: ConsumerBatch
      /** The batch's local outbox rows, read once for the batch (per-record mode). */
      readonly rows: ReadonlyMap<string, OutboxMessage> | undefined
    }
  | { readonly _tag: "exclusive"; readonly run: Effect.Effect<void>; readonly cancel: Effect.Effect<void> }

/** One partition's lanes and bounds. */
interface Lanes {
  /** Queued items per key; a key is present while its lane's fiber runs. */
  readonly byKey: Map<string | null, Array<Item>>
  readonly fibers: Set<Fiber.Fiber<void, unknown>>
  /** `perPartition` permits: handlers running at once. */
  readonly handlers: Semaphore.Semaphore
  /** `maxHeld` permits: records held (queued or running). */
  readonly window: Semaphore.Semaphore
  /** When each held record was taken in, by offset, oldest first (insertion order). */
  readonly heldSince: Map<string, number>
  committing: boolean
  dirty: boolean
}

/** Every partition's lanes of a running consumer. */
export interface KeyDispatch {
  readonly setting: KeyConcurrency
  readonly partitions: Map<string, Lanes>
}

export const make = (setting: KeyConcurrency): KeyDispatch => ({ setting, partitions: new Map() })

const lanesOf = (dispatch: KeyDispatch, state: PartitionState): Lanes => {
  const id = Partition.idOf(state.topic, state.partition)
  let lanes = dispatch.partitions.get(id)
  if (lanes === undefined) {
    lanes = {
      byKey: new Map(),
      fibers: new Set(),
      handlers: Semaphore.makeUnsafe(dispatch.setting.perPartition),
      window: Semaphore.makeUnsafe(dispatch.setting.maxHeld),
      heldSince: new Map(),
      committing: false,
      dirty: false
    }
    dispatch.partitions.set(id, lanes)
  }
  return lanes
}

/**
 * Takes a fetched batch in (the partition worker's step): each record joins its key's lane,
 * waiting while the window is full.
 */
export const accept = (
  workers: Workers,
  dispatch: KeyDispatch,
  state: PartitionState,
  batch: ConsumerBatch
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const settings = workers.batch
    // Shutting down: left unfinished (uncommitted) for the next member.
    if (settings.stopping()) return
    if (!settings.subscription.isCurrent(batch)) return yield* Batch.dropRevoked(batch.records)
    Partition.deliver(state, batch)
    state.latest = batch
    yield* Batch.refreshParked(settings, state)
    const lanes = lanesOf(dispatch, state)
    // One read of the batch's local outbox rows, as the sequential path does (when it fails, each
    // record reads its own); per-batch mode reads them per transaction.
    const rows = settings.perBatch
      ? undefined
      : Option.getOrUndefined(yield* Effect.option(Batch.lookupRows(settings.record, batch.records)))
    for (let i = 0; i < batch.records.length; i++) {
      const record = batch.records[i]!
      yield* Semaphore.take(lanes.window, 1)
      // Waiting for room, the partition may have been revoked or the consumer begun to stop.
      if (settings.stopping() || !settings.subscription.isCurrent(batch)) {
        yield* Semaphore.release(lanes.window, 1)
        if (!settings.stopping()) yield* Batch.dropRevoked(batch.records.slice(i))
        return
      }
      lanes.heldSince.set(record.offset, yield* Clock.currentTimeMillis)
      yield* enqueue(workers, lanes, state, record.key, { _tag: "record", record, batch, rows })
    }
  })

/** Adds `item` to its key's lane, starting the lane when the key had none. */
const enqueue = (workers: Workers, lanes: Lanes, state: PartitionState, key: string | null, item: Item) =>
  Effect.suspend(() => {
    const queued = lanes.byKey.get(key)
    if (queued !== undefined) {
      queued.push(item)
      return Effect.void
    }
    // No yield between the look-up and the set: a key never gets two lanes.
    lanes.byKey.set(key, [item])
    return runLane(workers, lanes, state, key).pipe(
      Effect.onInterrupt(() => cancelQueued(lanes, key)),
      Effect.tapCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(workers.failed, cause)
      ),
      Effect.forkIn(workers.scope),
      Effect.tap((fiber) =>
        Effect.sync(() => {
          lanes.fibers.add(fiber)
          fiber.addObserver(() => {
            lanes.fibers.delete(fiber)
          })
        })
      ),
      Effect.asVoid
    )
  })

/** A lane: its key's items in order until none is left. */
const runLane = (
  workers: Workers,
  lanes: Lanes,
  state: PartitionState,
  key: string | null
): Effect.Effect<void, DeadLetter.DeadLetterPublishError> =>
  Effect.gen(function* () {
    while (true) {
      const queued = lanes.byKey.get(key)!
      const head = queued[0]
      if (head === undefined) {
        lanes.byKey.delete(key)
        return
      }
      if (head._tag === "exclusive") {
        queued.shift()
        yield* lanes.handlers.withPermits(1)(head.run)
        continue
      }
      // The key's records of one fetched batch: one transaction in per-batch mode.
      let n = 1
      while (n < queued.length && n < MAX_CHUNK && sameBatch(queued[n]!, head.batch)) n++
      const chunk = queued.splice(0, n).map((item) => (item as Extract<Item, { _tag: "record" }>).record)
      yield* runChunk(workers, lanes, state, head.batch, chunk, head.rows)
    }
  })

/** Between two commits of a partition while records keep finishing. */
const COMMIT_SPACING = "100 millis"

/** Records a lane takes at once (per-batch mode: one transaction). */
const MAX_CHUNK = 100

const sameBatch = (item: Item, batch: ConsumerBatch) => item._tag === "record" && item.batch === batch

const runChunk = (
  workers: Workers,
  lanes: Lanes,
  state: PartitionState,
  batch: ConsumerBatch,
  records: ReadonlyArray<ConsumerRecord>,
  rows: ReadonlyMap<string, OutboxMessage> | undefined
) =>
  Effect.gen(function* () {
    const settings = workers.batch
    // Revoked since it was fetched: the new owner runs these; stopping: the next member does.
    const goOn = () => !settings.stopping() && settings.subscription.isCurrent(batch)
    if (settings.perBatch) {
      yield* lanes.handlers.withPermits(1)(Batch.processInRounds(settings, state, records, goOn))
      yield* release(lanes, records)
      yield* commit(workers, lanes, state)
    } else {
      for (let i = 0; i < records.length; i++) {
        const record = records[i]!
        const ran = yield* lanes.handlers.withPermits(1)(
          Effect.suspend(() =>
            goOn()
              ? Effect.as(Batch.handleRecord(settings, state, record, undefined, rows), true)
              : Effect.succeed(false)
          )
        )
        if (!ran) {
          const rest = records.slice(i)
          if (!settings.stopping()) yield* Batch.dropRevoked(rest)
          yield* release(lanes, rest)
          break
        }
        yield* release(lanes, [record])
        yield* commit(workers, lanes, state)
      }
    }
  })

/** The records left the window (finished, parked, dropped or left for the next member). */
const release = (lanes: Lanes, records: ReadonlyArray<ConsumerRecord>) =>
  Effect.suspend(() => {
    for (const record of records) lanes.heldSince.delete(record.offset)
    return Semaphore.release(lanes.window, records.length)
  })

/**
 * Commits what finished, one commit in flight per partition, on a fiber of its own (a lane never
 * waits on a commit): a record that finishes while a commit runs marks the partition dirty, and
 * the committer commits again `COMMIT_SPACING` later — records finish out of order many times a
 * second, and a commit per finish would cost the broker a write each (a crash redelivers at most
 * that much more; the inbox absorbs it).
 */
const commit = (workers: Workers, lanes: Lanes, state: PartitionState): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (lanes.committing) {
      lanes.dirty = true
      return Effect.void
    }
    lanes.committing = true
    return Effect.gen(function* () {
      lanes.dirty = false
      yield* Partition.commit(workers.batch.subscription, state)
      while (lanes.dirty) {
        yield* Effect.sleep(COMMIT_SPACING)
        lanes.dirty = false
        yield* Partition.commit(workers.batch.subscription, state)
      }
    }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          lanes.committing = false
        })
      ),
      Effect.forkIn(workers.scope),
      Effect.asVoid
    )
  })

/**
 * Commits what finished on `state`'s partition, never beside another commit of it (two commits
 * racing could land out of order and move the offset back): with key concurrency through the
 * partition's one commit in flight, else between the worker's batches.
 */
export const commitPartition = (workers: Workers, state: PartitionState): Effect.Effect<void> =>
  workers.keyed === undefined
    ? state.lock.withPermits(1)(Partition.commit(workers.batch.subscription, state))
    : commit(workers, lanesOf(workers.keyed, state), state)

/** A lane interrupted (shutdown timed out): releases waiting for this key will not run. */
const cancelQueued = (lanes: Lanes, key: string | null) =>
  Effect.suspend(() => {
    const queued = lanes.byKey.get(key) ?? []
    lanes.byKey.delete(key)
    return Effect.forEach(queued, (item) => (item._tag === "exclusive" ? item.cancel : Effect.void), {
      discard: true
    })
  })

/**
 * Runs `effect` alone on `key` of the partition (a release of a parked key), never holding the
 * partition: with key concurrency in the key's lane, after the key's records queued before it and
 * before those queued after; without, on the key's lock while the worker goes on with the other
 * keys (the key's own records wait parked behind the release).
 */
export const exclusive =
  (workers: Workers, state: PartitionState, key: string) =>
  <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> => {
    const dispatch = workers.keyed
    if (dispatch === undefined) return Partition.withKeyLock(state, key)(effect)
    return Effect.gen(function* () {
      const done = yield* Deferred.make<A, E>()
      const run = Effect.flatMap(Effect.exit(effect), (exit) => Deferred.done(done, exit))
      yield* enqueue(workers, lanesOf(dispatch, state), state, key, {
        _tag: "exclusive",
        run: Effect.asVoid(run),
        cancel: Effect.asVoid(Deferred.interrupt(done))
      })
      return yield* Deferred.await(done)
    })
  }

/** The partition's worker reached the end of its queue (shutdown): waits for its lanes. */
export const drain = (dispatch: KeyDispatch, state: PartitionState): Effect.Effect<void> =>
  Effect.gen(function* () {
    const lanes = dispatch.partitions.get(Partition.idOf(state.topic, state.partition))
    if (lanes === undefined) return
    while (lanes.fibers.size > 0) {
      // A lane that ended before its observer was added is removed here.
      const fibers = [...lanes.fibers]
      yield* Fiber.awaitAll(fibers)
      for (const fiber of fibers) lanes.fibers.delete(fiber)
    }
  })

/**
 * Sets the in-flight window's gauges of every partition: records held, and the age of the oldest
 * record taken in and not finished (0 when none).
 */
export const sample = (dispatch: KeyDispatch, groupId: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    for (const [id, lanes] of dispatch.partitions) {
      const [topic, partition] = id.split("\u0000")
      const attributes = { group: groupId, topic: topic!, partition: partition! }
      const oldest = lanes.heldSince.values().next()
      yield* Metric.update(Metric.withAttributes(Telemetry.consumerHeldRecords, attributes), lanes.heldSince.size)
      yield* Metric.update(
        Metric.withAttributes(Telemetry.consumerOldestUnfinishedAge, attributes),
        oldest.done === true ? 0 : now - oldest.value
      )
    }
  })

/** Samples the window's gauges every second while the consumer runs. */
export const sampleEverySecond = (dispatch: KeyDispatch, groupId: string) =>
  sample(dispatch, groupId).pipe(Effect.repeat(Schedule.spaced("1 second")), Effect.asVoid)
