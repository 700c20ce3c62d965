/**
 * The waits between tries, shared by both relay engines: a jittered exponential `Schedule`
 * capped at a maximum, and three ways to read it. The claim relay asks for the delay before a
 * row's n-th retry (`retryDelay`) and after the n-th outage in a row (`outageDelay`); the log
 * relay, which retries one window at a time, walks the schedule step by step and starts over
 * after a success (`delays`). Time comes from effect's `Clock` and jitter from its `Random`, so
 * `TestClock` and `Random.withSeed` make every wait reproducible.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/**
 * Exponential backoff from `base` (times `factor` per step) with jitter (each delay scaled by a
 * random factor between 0.8 and 1.2), each delay capped at `max`. It never finishes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const exponential = (base: Duration.Input, max: Duration.Input, factor = 2): Schedule.Schedule<unknown> => {
  const cap = Duration.toMillis(Duration.fromInputUnsafe(max))
  return Schedule.exponential(base, factor).pipe(
    Schedule.jittered,
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.millis(Math.min(Duration.toMillis(duration), cap))))
  )
}

/**
 * The delay in millis before retry number `attempt` (1-based), or `None` when the schedule has
 * no more recurrences (give up).
 *
 * @since 0.1.0
 * @category reading
 */
export const retryDelay = (
  schedule: Schedule.Schedule<unknown>,
  attempt: number
): Effect.Effect<Option.Option<number>> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    const now = yield* Clock.currentTimeMillis
    let delay = 0
    for (let i = 0; i < attempt; i++) {
      const [, duration] = yield* step(now, undefined)
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
 * @since 0.1.0
 * @category reading
 */
export const outageDelay = (schedule: Schedule.Schedule<unknown>, n: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    const now = yield* Clock.currentTimeMillis
    let delay = 0
    for (let i = 0; i < n; i++) {
      const next = yield* Effect.exit(step(now, undefined))
      if (Exit.isFailure(next)) break
      delay = Duration.toMillis(next.value[1])
    }
    return Math.max(0, Math.round(delay))
  })

/**
 * A schedule read one failure at a time, for a loop that waits after each failed try and starts
 * over once a try succeeds.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delays {
  /** The next delay in millis: the schedule's next one, or its last once it has finished. */
  readonly next: Effect.Effect<number>
  /** Back to the schedule's first delay (after a success). */
  readonly reset: Effect.Effect<void>
}

/**
 * Reads `schedule` one delay per failure (see {@link Delays}).
 *
 * @since 0.1.0
 * @category reading
 */
export const delays = (schedule: Schedule.Schedule<unknown>): Effect.Effect<Delays> =>
  Effect.gen(function* () {
    let step = yield* Schedule.toStep(schedule)
    let fresh = true
    let last = 0
    const next = Effect.gen(function* () {
      fresh = false
      const now = yield* Clock.currentTimeMillis
      const result = yield* Effect.exit(step(now, undefined))
      if (Exit.isSuccess(result)) last = Math.max(0, Math.round(Duration.toMillis(result.value[1])))
      return last
    })
    const reset = Effect.gen(function* () {
      if (fresh) return
      step = yield* Schedule.toStep(schedule)
      fresh = true
    })
    return { next, reset }
  })
