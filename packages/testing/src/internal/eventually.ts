/**
 * Waiting helpers of the suites whose ports promise "eventually" (a wake-up signal, a committed
 * Kafka transaction becoming visible): poll on a short schedule, up to a bound, and fail with a
 * message that says what never happened.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

/** Repeats `check` every 20 ms until it holds, for at most `withinMillis`. */
export const eventually = <A, E, R>(
  check: Effect.Effect<A, E, R>,
  holds: (a: A) => boolean,
  what: string,
  withinMillis = 15_000
): Effect.Effect<A, E | Error, R> =>
  check.pipe(
    Effect.filterOrFail(holds, (a) => new Error(`${what} (last seen: ${JSON.stringify(a)})`)),
    Effect.retry({ schedule: Schedule.spaced("20 millis"), times: Math.ceil(withinMillis / 20) })
  )

/** Counts the elements of `stream` in a fiber of the enclosing scope. */
export const counting = <E, R>(
  stream: Stream.Stream<unknown, E, R>
): Effect.Effect<Ref.Ref<number>, never, R | Scope.Scope> =>
  Effect.gen(function* () {
    const count = yield* Ref.make(0)
    yield* Effect.forkScoped(Stream.runForEach(stream, () => Ref.update(count, (n) => n + 1)))
    return count
  })

/**
 * The count once it has not moved for `quietMillis`, and not before `atLeastMillis` have passed
 * (at most 10 s): what a subscriber saw of the signals already under way (a connect signal that a
 * busy machine delays, the tail of a burst).
 */
export const settled = (
  count: Ref.Ref<number>,
  quietMillis = 400,
  atLeastMillis = 1_000
): Effect.Effect<number, Error> =>
  Effect.gen(function* () {
    let last = yield* Ref.get(count)
    for (let waited = 0; waited < 10_000; waited += quietMillis) {
      yield* Effect.sleep(quietMillis)
      const now = yield* Ref.get(count)
      if (now === last && waited + quietMillis >= atLeastMillis) return now
      last = now
    }
    return yield* Effect.fail(new Error(`signals never went quiet (${last} so far)`))
  })
