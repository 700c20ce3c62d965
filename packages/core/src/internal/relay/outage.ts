/**
 * The relay's outage state: publishes in a row that found the broker unavailable,
 * and the time before which the loop claims nothing. An outage counts no attempt and churns no
 * rows; a publish that gets through ends it.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import { outageDelay } from "../../Backoff.ts"
import type { PublishOutcome } from "../../Publisher.ts"
import { describe, isUnavailable } from "./publish.ts"

export interface Outage {
  /** Epoch millis before which the loop claims nothing. */
  readonly pausedUntil: () => number
  /**
   * Notes a batch's outcomes: any unavailable one enters (or prolongs) the outage, a success ends
   * it. Returns when the batch's unavailable rows may retry.
   */
  readonly note: (outcomes: ReadonlyArray<PublishOutcome>, now: number) => Effect.Effect<number>
  /** One more unavailable publish in a row: pause claiming for the outage backoff. */
  readonly enter: (now: number, reason: string) => Effect.Effect<number>
}

export const make = (owner: string, outageBackoff: Schedule.Schedule<unknown>): Outage => {
  let outages = 0
  let pausedUntil = 0

  const enter = (now: number, reason: string) =>
    Effect.gen(function* () {
      outages++
      const delay = yield* outageDelay(outageBackoff, outages)
      pausedUntil = Math.max(pausedUntil, now + delay)
      yield* Effect.logWarning(
        `outbox relay ${owner}: broker unavailable (${outages} in a row), no attempt counted; claiming again in ${delay} ms: ${reason}`
      )
      return now + delay
    })

  const note = (outcomes: ReadonlyArray<PublishOutcome>, now: number) =>
    Effect.gen(function* () {
      const first = outcomes.find(isUnavailable)
      if (first === undefined) {
        if (outages > 0 && outcomes.some(Result.isSuccess)) {
          yield* Effect.logInfo(`outbox relay ${owner}: the broker answers again after ${outages} failed publishes`)
          outages = 0
        }
        return now
      }
      return yield* enter(now, Result.isFailure(first) ? describe(first.failure) : "")
    })

  return { pausedUntil: () => pausedUntil, note, enter }
}
