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
 * Processes a parked key's records now, in order. One that fails again is dead-lettered and parks
 * the rest again (the record runner queues them behind it).
 */
export const release =
  (workers: Workers): Release =>
  (target) =>
    Effect.gen(function* () {
      const state = workers.partitions.get(Partition.idOf(target.topic, target.partition))
      if (state === undefined) return 0
      return yield* Effect.gen(function* () {
        const waiting = Partition.unpark(state, target.key)
        if (waiting === undefined) return 0
        let processed = 0
        for (const record of waiting) {
          if ((yield* Batch.handleRecord(workers.batch, state, record)) === "done") processed++
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
 * them head first, in offset order, on the partition's lock (no record of the key interleaves).
 * The read runs before the lock is taken, so the partition's worker goes on while it runs; under
 * the lock only what is still parked then runs (another release may have run the key meanwhile),
 * and records the key parked during the read are read there too. A record dead-lettered again
 * stops the release: it and the rest stay parked. Only the member that owns the partition
 * releases it (another would race its worker); elsewhere it answers 0.
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
      const groupId = workers.batch.record.groupId
      const parkedOffsets = Effect.map(
        store.list({ consumer: groupId, topic: target.topic, partition: target.partition }).pipe(Effect.orDie),
        (keys) => keys.find((k) => k.key === target.key)?.offsets ?? []
      )
      const offsets = yield* parkedOffsets
      if (offsets.length === 0) return 0
      const read = yield* readParked(reader, target, offsets)
      return yield* Effect.gen(function* () {
        const still = yield* parkedOffsets
        const tried = new Set(offsets)
        const later = yield* readParked(
          reader,
          target,
          still.filter((offset) => !tried.has(offset))
        )
        const parked = new Set(still)
        const records = [...read.filter((r) => parked.has(r.offset)), ...later]
        let processed = 0
        for (const record of records) {
          const result = yield* RecordRunner.runRecord(workers.batch.record, record)
          if (result === "dead_lettered") break
          yield* store.remove(groupId, [record]).pipe(Effect.orDie)
          processed++
        }
        // Positions the topic no longer holds (retention) cannot run: they are forgotten.
        const found = new Set(records.map((r) => r.offset))
        const gone = still.filter((offset) => !found.has(offset))
        if (gone.length > 0) {
          yield* Effect.logError(
            `parked ${target.topic}/${target.partition} key ${target.key}: offsets ${gone.join(", ")} are no longer on the topic (retention deleted them before their release)`
          )
          yield* store
            .remove(
              groupId,
              gone.map((offset) => ({ ...target, offset }))
            )
            .pipe(Effect.orDie)
        }
        yield* Batch.refreshParked(workers.batch, state)
        return processed
      }).pipe(exclusive(workers, state, target.key))
    })

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
