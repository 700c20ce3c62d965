/**
 * Background jobs (retention, the reconciler, stale recovery and its lease heartbeat, the gauges,
 * the log relay's lease): a round now, then again after each delay of a `Schedule` that sees the
 * last round's result, for as long as the fiber lives.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

/**
 * Repeats `round` on `schedule`, forever. The schedules passed here never end; `Effect.never`
 * after the repeat only gives the job the type `never` its callers promise.
 */
export const repeatForever = <A, R, Env = never>(
  round: Effect.Effect<A, never, R>,
  schedule: Schedule.Schedule<unknown, A, never, Env>
): Effect.Effect<never, never, R | Env> => round.pipe(Effect.repeat(schedule), Effect.andThen(Effect.never))

/** {@link repeatForever} with a fixed pause between rounds. */
export const every = <R>(
  interval: Duration.Input,
  round: Effect.Effect<unknown, never, R>
): Effect.Effect<never, never, R> => repeatForever(round, Schedule.spaced(interval))
