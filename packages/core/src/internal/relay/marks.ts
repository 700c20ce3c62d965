/**
 * The relay's marks, written as a group commit: a batch whose outcome is ready while another
 * batch's mark statement runs waits for it, and every batch that waited goes into the next
 * statement together (one `Transition.settle` of all their rows, each row under its own batch's
 * lease). With several batches in flight, marks then cost one statement per round instead of
 * one per batch. A lone batch writes at once: nothing waits for company.
 *
 * A statement that fails fails every batch in it: their rows stay `DISPATCHING` for stale
 * recovery, as after a failed mark of one batch. A writer interrupted mid-statement leaves its
 * group to the next writer; writing a mark twice is harmless, each move being a compare-and-set
 * on the row's lease.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Semaphore from "effect/Semaphore"
import type { StoreError } from "../../Errors.ts"
import type { OutboxStore } from "../../OutboxStore.ts"
import * as Transition from "../../Transition.ts"

/** One batch's outcome: what `Transition.settle` takes. */
export interface Outcome {
  readonly published: ReadonlyArray<Transition.Published>
  readonly failed: ReadonlyArray<Transition.PublishFailure>
  readonly released: ReadonlyArray<Transition.Released>
}

export interface Marks {
  /** Writes a batch's outcome, alone or together with the outcomes waiting beside it. */
  readonly settle: (outcome: Outcome) => Effect.Effect<void, StoreError, OutboxStore>
}

interface Waiting {
  readonly outcome: Outcome
  readonly done: Deferred.Deferred<void, StoreError>
}

const merge = (group: ReadonlyArray<Waiting>): Outcome => ({
  published: group.flatMap((w) => w.outcome.published),
  failed: group.flatMap((w) => w.outcome.failed),
  released: group.flatMap((w) => w.outcome.released)
})

export const make = (): Marks => {
  let waiting: Array<Waiting> = []
  // One statement at a time: whoever holds the permit writes everything waiting.
  const writer = Semaphore.makeUnsafe(1)

  const round = Effect.suspend(() => {
    const group = waiting
    waiting = []
    if (group.length === 0) return Effect.void
    return Effect.exit(Transition.settle(merge(group))).pipe(
      Effect.flatMap((exit) =>
        Effect.forEach(group, (w) => Deferred.done(w.done, Exit.asVoid(exit)), { discard: true })
      ),
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          waiting = [...group, ...waiting]
        })
      )
    )
  })

  const settle = (outcome: Outcome) =>
    Effect.gen(function* () {
      if (outcome.published.length + outcome.failed.length + outcome.released.length === 0) return
      const done = yield* Deferred.make<void, StoreError>()
      waiting.push({ outcome, done })
      // Written by an earlier writer while this one waited for the permit: nothing to do.
      yield* Semaphore.withPermit(
        writer,
        Effect.flatMap(Deferred.isDone(done), (written) => (written ? Effect.void : round))
      )
      yield* Deferred.await(done)
    })

  return { settle }
}
