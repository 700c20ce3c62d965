/**
 * The relay's delays: the retry backoff of a failed record and the pause after an outage.
 * Re-exported by `Relay.ts`.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/**
 * Exponential backoff from `base` with jitter, each delay capped at `max`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const backoff = (base: Duration.Input, max: Duration.Input, factor = 2): Schedule.Schedule<unknown> => {
  const cap = Duration.toMillis(max)
  return Schedule.exponential(base, factor).pipe(
    Schedule.jittered,
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.millis(Math.min(Duration.toMillis(duration), cap))))
  )
}

/**
 * The delay in millis before retry number `attempt` (1-based), or `None` when the schedule has
 * no more recurrences.
 *
 * @since 0.1.0
 * @category backoff
 */
export const retryDelay = (
  schedule: Schedule.Schedule<unknown>,
  attempt: number
): Effect.Effect<Option.Option<number>> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    let delay = 0
    for (let i = 0; i < attempt; i++) {
      const [, duration] = yield* step(0, undefined)
      delay = Duration.toMillis(duration)
    }
    return delay
  }).pipe(
    Effect.exit,
    Effect.map((exit) => (Exit.isSuccess(exit) ? Option.some(exit.value) : Option.none()))
  )

/**
 * The delay in millis after the `n`-th outage in a row (1-based): the schedule's n-th delay, or
 * its last one when it finished earlier (an outage is never given up on).
 *
 * @since 0.2.0
 * @category backoff
 */
export const outageDelay = (schedule: Schedule.Schedule<unknown>, n: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    let delay = 0
    for (let i = 0; i < n; i++) {
      const next = yield* Effect.exit(step(0, undefined))
      if (Exit.isFailure(next)) break
      delay = Duration.toMillis(next.value[1])
    }
    return Math.max(0, Math.round(delay))
  })
