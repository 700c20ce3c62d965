/**
 * The relay's pipelined loop (`Relay.run`): up to `pipelineDepth` batches in flight, each in a
 * child fiber of its own. A batch takes a slot before its claim and gives it back once settled;
 * the loop claims again at once when a claim came back full, otherwise after a wake-up (the
 * store's `WakeUp`, or a batch asking for one) or the poll interval; it claims nothing while an
 * outage pauses it. Once `stopped` completes it claims no more and waits for the batches in
 * flight.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import type { StoreError } from "../../Errors.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import { WakeUp } from "../../WakeUp.ts"

/** How a batch run by the pipelined loop talks back to it. */
export interface Pipeline {
  /** Completed with the claim's size, or its failure, as soon as the claim returns. */
  readonly claimed: Deferred.Deferred<number, StoreError>
  /** Asks the loop for another claim (a wake-up of the relay's own). */
  readonly wake: Effect.Effect<void>
}

// Whether some key has `maxPerKey` rows in the batch (its prefix may go on in PENDING).
export const cutAtMaxPerKey = (rows: ReadonlyArray<OutboxMessage>, maxPerKey: number): boolean => {
  const perKey = new Map<string, number>()
  for (const row of rows) {
    if (row.key === null) continue
    const n = (perKey.get(row.key) ?? 0) + 1
    if (n >= maxPerKey) return true
    perKey.set(row.key, n)
  }
  return false
}

export interface LoopSettings {
  readonly batchSize: number
  readonly pipelineDepth: number
  readonly pollInterval: Duration.Duration
}

export const run = <R>(options: {
  readonly owner: string
  readonly settings: LoopSettings
  readonly stopped: Deferred.Deferred<void>
  readonly pausedUntil: () => number
  readonly batch: (pipeline: Pipeline) => Effect.Effect<unknown, StoreError, R>
}): Effect.Effect<void, never, R> => {
  const { batch, owner, pausedUntil, settings: s, stopped } = options
  return Effect.gen(function* () {
    const signal = yield* Queue.sliding<void>(1)
    const wakeUp = yield* Effect.serviceOption(WakeUp)
    if (Option.isSome(wakeUp)) {
      yield* Effect.forkChild(Stream.runForEach(wakeUp.value.signals, () => Queue.offer(signal, undefined)))
    }
    const idle = Effect.raceFirst(Queue.take(signal), Effect.sleep(s.pollInterval)).pipe(
      Effect.andThen(Queue.clear(signal)),
      Effect.raceFirst(Deferred.await(stopped))
    )
    const wake = Effect.asVoid(Queue.offer(signal, undefined))
    // One permit per batch in flight: taken before its claim, given back when it is settled.
    const slots = yield* Semaphore.make(s.pipelineDepth)
    while (!(yield* Deferred.isDone(stopped))) {
      yield* Semaphore.take(slots, 1)
      if (yield* Deferred.isDone(stopped)) {
        yield* Semaphore.release(slots, 1)
        break
      }
      // The broker is unavailable: claim nothing until the outage backoff has passed.
      const pause = pausedUntil() - (yield* Clock.currentTimeMillis)
      if (pause > 0) {
        yield* Effect.sleep(Duration.millis(pause)).pipe(Effect.raceFirst(Deferred.await(stopped)))
        yield* Semaphore.release(slots, 1)
        continue
      }
      const claimed = yield* Deferred.make<number, StoreError>()
      // A child fiber: interrupting the loop (a crash) interrupts every batch in flight.
      yield* Effect.forkChild(
        batch({ claimed, wake }).pipe(
          Effect.catch((error) =>
            Effect.logWarning(`outbox relay ${owner}: batch failed, retrying at next poll: ${error.message}`)
          ),
          Effect.ensuring(Semaphore.release(slots, 1))
        )
      )
      const count = yield* Deferred.await(claimed).pipe(Effect.orElseSucceed(() => 0))
      // A full batch suggests more work: claim again at once; otherwise wait for news.
      if (count < s.batchSize) yield* idle
      else yield* Effect.yieldNow
    }
    // Stopped: let the batches in flight finish (all permits back means none is left).
    yield* Semaphore.take(slots, s.pipelineDepth)
  }).pipe(Effect.annotateLogs({ relay: owner }))
}
