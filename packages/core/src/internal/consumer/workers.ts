/**
 * The partitions' workers: a dispatcher hands each fetched batch to its partition's buffer, one
 * worker per partition runs them in order (at most `concurrency` at a time), and shutdown lets
 * the records in flight finish before committing what finished.
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import type { ConsumerBatch } from "../../ConsumerSource.ts"
import type { ConsumerSourceError, DeadLetterPublishError } from "../../Errors.ts"
import * as Batch from "./batch.ts"
import * as KeyDispatch from "./keyDispatch.ts"
import type { PartitionState } from "./partition.ts"
import * as Partition from "./partition.ts"

/** The partitions' workers and what they share. */
export interface Workers {
  readonly batch: Batch.BatchSettings
  readonly partitions: Map<string, PartitionState>
  readonly failed: Deferred.Deferred<never, ConsumerSourceError | DeadLetterPublishError>
  /** At most `concurrency` partitions process a batch at the same time. */
  readonly permits: Semaphore.Semaphore
  readonly scope: Scope.Closeable
  readonly bufferedBatches: number
  /** Key-ordered concurrency inside each partition (`concurrency: { by: "key" }`); off when undefined. */
  readonly keyed?: KeyDispatch.KeyDispatch | undefined
}

/**
 * Hands each fetched batch to its partition's buffer (a worker per partition, started on demand).
 * It never waits on a partition: a partition whose buffer is full is paused at the source
 * and resumed when its worker catches up, so a slow or retrying partition holds back neither the
 * others nor the member's rejoin in a rebalance (the source is always pulled promptly).
 */
export const dispatch = (workers: Workers) =>
  workers.batch.subscription.batches.pipe(
    Stream.runForEach((batch) =>
      batch.records.length === 0
        ? Effect.void
        : Effect.flatMap(partitionOf(workers, batch.topic, batch.partition), (state) =>
            Effect.andThen(Queue.offer(state.queue, batch), () =>
              !state.paused && Queue.sizeUnsafe(state.queue) >= workers.bufferedBatches
                ? Effect.andThen(
                    Effect.sync(() => {
                      state.paused = true
                    }),
                    workers.batch.subscription.pause([state])
                  )
                : Effect.void
            )
          )
    ),
    Effect.tapCause((cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(workers.failed, cause)
    )
  )

const partitionOf = (workers: Workers, topic: string, partition: number) =>
  Effect.gen(function* () {
    const id = Partition.idOf(topic, partition)
    const existing = workers.partitions.get(id)
    if (existing !== undefined) return existing
    const state: PartitionState = {
      topic,
      partition,
      // Unbounded, but pausing bounds it: at most what the source fetched before the pause.
      queue: yield* Queue.unbounded<ConsumerBatch, Cause.Done>(),
      lock: yield* Semaphore.make(1),
      keyLocks: new Map(),
      notDone: [],
      maxDelivered: -1n,
      lastCommitted: -1n,
      parked: new Map(),
      fiber: undefined,
      paused: false,
      latest: undefined
    }
    workers.partitions.set(id, state)
    state.fiber = yield* work(workers, state).pipe(
      Effect.tapCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(workers.failed, cause)
      ),
      Effect.forkIn(workers.scope)
    )
    return state
  })

/** A partition's worker: its batches in order, until its queue ends. */
const work = (workers: Workers, state: PartitionState): Effect.Effect<void, DeadLetterPublishError> =>
  Effect.gen(function* () {
    while (true) {
      const next = yield* Effect.exit(Queue.take(state.queue))
      if (Exit.isFailure(next)) {
        // Key concurrency: the partition's lanes finish (or are interrupted by shutdown) first.
        if (workers.keyed !== undefined) yield* KeyDispatch.drain(workers.keyed, state)
        return
      }
      if (state.paused && Queue.sizeUnsafe(state.queue) < workers.bufferedBatches) {
        state.paused = false
        yield* workers.batch.subscription.resume([state])
      }
      if (workers.keyed !== undefined) {
        yield* KeyDispatch.accept(workers, workers.keyed, state, next.value)
        continue
      }
      yield* Batch.processBatch(workers.batch, state, next.value).pipe(
        state.lock.withPermits(1),
        workers.permits.withPermits(1)
      )
    }
  })

/** Stops fetching, lets records in flight finish for up to `timeout`, commits what finished. */
export const shutdown = (workers: Workers, dispatcher: Fiber.Fiber<void, unknown>, timeout: Duration.Input) =>
  Effect.gen(function* () {
    yield* Fiber.interrupt(dispatcher)
    const states = [...workers.partitions.values()]
    for (const state of states) yield* Queue.end(state.queue)
    const fibers = states.flatMap((state) => (state.fiber === undefined ? [] : [state.fiber]))
    yield* Fiber.awaitAll(fibers).pipe(Effect.timeoutOption(timeout), Effect.asVoid)
    yield* Scope.close(workers.scope, Exit.void)
    for (const state of states) yield* Partition.commit(workers.batch.subscription, state)
  })
