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
import type { PublishOutcome } from "../../Publisher.ts"
import { outageDelay } from "./backoff.ts"
import { describe, isUnavailable } from "./publish.ts"

export interface Outage {
  /** Epoch millis before which the loop claims nothing. */
  readonly pausedUntil: () => number
  /**
   * Notes a batch's outcomes: a batch where nothing got through enters (or prolongs) the outage; a
   * success ends it. Unavailable rows of a batch where others got through wait out the backoff
   * alone. Returns when the batch's unavailable rows may retry.
   */
  readonly note: (outcomes: ReadonlyArray<PublishOutcome>, now: number) => Effect.Effect<number>
  /** One more unavailable publish in a row: pause claiming for the outage backoff. */
  readonly enter: (now: number, reason: string) => Effect.Effect<number>
}

export const make = (owner: string, outageBackoff: Schedule.Schedule<unknown>): Outage => {
  let outages = 0
  let pausedUntil = 0
  // Batches in a row where some destinations were unavailable while others took their records.
  let partial = 0

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
      const through = outcomes.some(Result.isSuccess)
      if (through && outages > 0) {
        yield* Effect.logInfo(`outbox relay ${owner}: the broker answers again after ${outages} failed publishes`)
        outages = 0
      }
      if (first === undefined) {
        partial = 0
        return now
      }
      const reason = Result.isFailure(first) ? describe(first.failure) : ""
      // Nothing got through: the broker is out, claim nothing for a while.
      if (!through) return yield* enter(now, reason)
      // Some destinations only (one partition without a leader, a broker of several down): their
      // rows wait out the backoff, attempts unchanged; the loop keeps claiming everything else.
      partial++
      const delay = yield* outageDelay(outageBackoff, partial)
      const log = partial === 1 ? Effect.logWarning : Effect.logDebug
      yield* log(
        `outbox relay ${owner}: ${outcomes.filter(isUnavailable).length} record(s) to unavailable destinations wait ${delay} ms, no attempt counted (${partial} batch(es) in a row); the others were published: ${reason}`
      )
      return now + delay
    })

  return { pausedUntil: () => pausedUntil, note, enter }
}
