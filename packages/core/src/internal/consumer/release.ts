/**
 * Parked keys (optional parking): listing them, and releasing one — in memory (its records
 * wait in the partition) or durably (the `ParkedStore` holds their positions and a release
 * re-reads them by position with `TopicReader.readAt`), including the release requests the CLI leaves in the store.
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ConsumerRecord } from "../../ConsumerSource.ts"
import { ConsumerSourceError, type DeadLetterPublishError } from "../../Errors.ts"
import type * as Parked from "../../ParkedStore.ts"
import type { ParkedStore } from "../../ParkedStore.ts"
import * as Telemetry from "../../Telemetry.ts"
import type { TopicReader } from "../../TopicReader.ts"
import * as Batch from "./batch.ts"
import { commitPartition, exclusive } from "./keyDispatch.ts"
import type { PartitionState } from "./partition.ts"
import * as Partition from "./partition.ts"
import * as RecordRunner from "./record.ts"
import type { Workers } from "./workers.ts"

/** `Consumer.ParkedKey`: a parked key of this consumer (the store's record without its group). */
type ConsumerParkedKey = Omit<Parked.ParkedKey, "consumer">

/** Releases a parked key; returns how many of its records were processed. */
export type Release = (target: {
  readonly topic: string
  readonly partition: number
  readonly key: string
}) => Effect.Effect<number, ConsumerSourceError | DeadLetterPublishError>

export const parkedKeys = (
  partitions: ReadonlyMap<string, PartitionState>
): Effect.Effect<ReadonlyArray<ConsumerParkedKey>> =>
  Effect.sync(() =>
    [...partitions.values()].flatMap((state) =>
      [...state.parked.entries()].map(([key, records]) => ({
        topic: state.topic,
        partition: state.partition,
        key,
        offsets: records.map((record) => record.offset)
      }))
    )
  )

/**
 * Processes a parked key's records now, in order, on the key's lock: the partition's other keys
 * keep flowing. The key stays parked until its queue is empty, so a record of it that arrives
 * meanwhile queues behind the release, which runs it too. One that fails again is dead-lettered
 * and the rest stay parked behind it.
 */
export const release =
  (workers: Workers): Release =>
  (target) =>
    Effect.gen(function* () {
      const state = workers.partitions.get(Partition.idOf(target.topic, target.partition))
      if (state === undefined) return 0
      return yield* Effect.gen(function* () {
        const waiting = state.parked.get(target.key)
        if (waiting === undefined) return 0
        let processed = 0
        // Another array under the key: the partition came back rewound (its parking is stale).
        while (state.parked.get(target.key) === waiting && !workers.batch.stopping()) {
          const record = waiting.shift()
          if (record === undefined) {
            state.parked.delete(target.key)
            break
          }
          const result = yield* RecordRunner.runRecord(workers.batch.record, record)
          Partition.markDone(state, record)
          processed++
          if (result === "dead_lettered") break
        }
        yield* commitPartition(workers, state)
        return processed
      }).pipe(exclusive(workers, state, target.key))
    })

/** Durable parking: the group's parked keys as the store has them. */
export const durableParkedKeys = (
  store: ParkedStore["Service"],
  groupId: string
): Effect.Effect<ReadonlyArray<ConsumerParkedKey>> =>
  store.list({ consumer: groupId }).pipe(
    Effect.map((keys) =>
      keys.map(({ key, offsets, partition, topic }): ConsumerParkedKey => ({ topic, partition, key, offsets }))
    ),
    Effect.orDie
  )

/**
 * The retained records of a partition at `offsets`, in offset order: a positioned read when the
 * reader offers one, else the whole topic, filtered.
 */
const readParked = (
  reader: TopicReader["Service"],
  target: { readonly topic: string; readonly partition: number },
  offsets: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<ConsumerRecord>, ConsumerSourceError> => {
  if (offsets.length === 0) return Effect.succeed([])
  const wanted = new Set(offsets)
  const records =
    reader.readAt !== undefined
      ? reader.readAt({ topic: target.topic, partition: target.partition, offsets })
      : reader.read(target.topic).pipe(Stream.filter((r) => r.partition === target.partition))
  return records.pipe(
    Stream.filter((r) => wanted.has(r.offset)),
    Stream.runCollect,
    Effect.map((found) => [...found].sort((a, b) => (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1)))
  )
}

/**
 * Durable parking: re-reads the key's parked records by position (`TopicReader.readAt`) and runs
 * them head first, in offset order, on the key's lock (no record of the key interleaves; the
 * partition's other keys keep flowing). The first read runs before the lock is taken; under it
 * only what is still parked then runs (another release may have run the key meanwhile). The key
 * stays parked while its positions are in the store, so records of it that arrive during the
 * release park behind it, and the release runs them too: it ends when the store holds none of the
 * key, checked on the partition's lock so the worker's view of the parked keys is never older. A
 * record dead-lettered again stops the release: it and the rest stay parked. Only the member
 * that owns the partition releases it (another would race its worker); elsewhere it answers 0.
 */
export const releaseDurably =
  (workers: Workers, store: ParkedStore["Service"], reader: TopicReader["Service"] | undefined): Release =>
  (target) =>
    Effect.gen(function* () {
      const state = workers.partitions.get(Partition.idOf(target.topic, target.partition))
      if (state === undefined || !owns(workers, state)) return 0
      if (reader === undefined) {
        return yield* new ConsumerSourceError({
          operation: "read",
          reason: "releasing a durably parked key re-reads its records: provide a TopicReader",
          retriable: false
        })
      }
      const run = runDurably(workers, state, store, reader, target)
      const offsets = yield* run.parkedOffsets
      if (offsets.length === 0) return 0
      const read = yield* readParked(reader, target, offsets)
      return yield* run.drain(offsets, read).pipe(exclusive(workers, state, target.key))
    })

type Target = Parameters<Release>[0]

/** The steps of a durable release of `target` (`releaseDurably`). */
const runDurably = (
  workers: Workers,
  state: PartitionState,
  store: ParkedStore["Service"],
  reader: TopicReader["Service"],
  target: Target
) => {
  const groupId = workers.batch.record.groupId
  const parkedOffsets = Effect.map(
    store.list({ consumer: groupId, topic: target.topic, partition: target.partition }).pipe(Effect.orDie),
    (keys) => keys.find((k) => k.key === target.key)?.offsets ?? []
  )

  /** Runs `records` in order until one is dead-lettered again; removes each one that ran. */
  const runInOrder = (records: ReadonlyArray<ConsumerRecord>) =>
    Effect.gen(function* () {
      let processed = 0
      for (const record of records) {
        // Revoked meanwhile: the rest stay parked for the partition's new owner.
        if (!owns(workers, state) || workers.batch.stopping()) return { processed, stopped: true }
        const result = yield* RecordRunner.runRecord(workers.batch.record, record)
        if (result === "dead_lettered") return { processed, stopped: true }
        yield* store.remove(groupId, [record]).pipe(Effect.orDie)
        processed++
      }
      return { processed, stopped: false }
    })

  /** Positions the topic no longer holds (retention) cannot run: they are forgotten. */
  const forgetGone = (still: ReadonlyArray<string>, found: ReadonlyArray<ConsumerRecord>) =>
    Effect.gen(function* () {
      const offsets = new Set(found.map((r) => r.offset))
      const gone = still.filter((offset) => !offsets.has(offset))
      if (gone.length === 0) return
      yield* Effect.logError(
        `parked ${target.topic}/${target.partition} key ${target.key}: offsets ${gone.join(", ")} are no longer on the topic (retention deleted them before their release)`
      )
      yield* store
        .remove(
          groupId,
          gone.map((offset) => ({ ...target, offset }))
        )
        .pipe(Effect.orDie)
    })

  /** The worker's view of the parked keys, refreshed between its batches; whether the key is still parked. */
  const settle = state.lock.withPermits(1)(
    Effect.map(Batch.refreshParked(workers.batch, state), () => state.parked.has(target.key))
  )

  const drain = (offsets: ReadonlyArray<string>, firstRead: ReadonlyArray<ConsumerRecord>) =>
    Effect.gen(function* () {
      const tried = new Set(offsets)
      let read = firstRead
      let processed = 0
      while (true) {
        const still = yield* parkedOffsets
        const later = yield* readParked(
          reader,
          target,
          still.filter((offset) => !tried.has(offset))
        )
        for (const offset of still) tried.add(offset)
        const parked = new Set(still)
        const records = [...read.filter((r) => parked.has(r.offset)), ...later]
        read = []
        const ran = yield* runInOrder(records)
        processed += ran.processed
        yield* forgetGone(still, records)
        // Done unless records of the key parked while these ran.
        if (!(yield* settle) || ran.stopped) return processed
      }
    })

  return { parkedOffsets, drain }
}

const owns = (workers: Workers, state: PartitionState): boolean =>
  state.latest !== undefined && workers.batch.subscription.isCurrent(state.latest)

/** Runs the release requests for partitions this member owns, then clears them. */
export const serveReleaseRequests = (
  workers: Workers,
  store: ParkedStore["Service"],
  reader: TopicReader["Service"] | undefined
) =>
  Effect.gen(function* () {
    const requests = yield* store.releaseRequests(workers.batch.record.groupId)
    for (const request of requests) {
      const state = workers.partitions.get(Partition.idOf(request.topic, request.partition))
      if (state === undefined || !owns(workers, state)) continue
      const processed = yield* releaseDurably(workers, store, reader)(request)
      yield* store.clearRelease(request)
      yield* Effect.logInfo(
        `released parked key ${request.key} of ${request.topic}/${request.partition}: ${processed} record(s) processed`
      )
    }
  }).pipe(
    Effect.catch((error) => Effect.logWarning(`serving parked release requests failed: ${error.message}`)),
    Effect.withSpan(Telemetry.spans.consumerParkedRelease)
  )
