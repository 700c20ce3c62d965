/**
 * The one retry policy for broker calls besides sends: metadata, admin and group offsets, the
 * probe's and the topic reader's offset lookups and consumer start, topic creation, a consumer
 * group subscription. A broker formatted seconds ago, a group coordinator still loading, a leader
 * being elected, a connection refused for a moment: asked again a little later, these calls
 * succeed. Errors the driver's `isRetriableBrokerCall` accepts are retried on an exponential,
 * jittered, capped `Schedule` for a bounded total time; anything else, and the last error once the
 * time is up, reaches the caller, which maps it to its typed error.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { Protocol } from "./KafkaProtocol.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface BrokerRetryPolicy {
  /** Delay before the first retry (default 100 ms); doubles on each retry. */
  readonly initialDelayMillis: number
  /** Longest delay between two attempts (default 2000 ms), before jitter (x0.8 to x1.2). */
  readonly maxDelayMillis: number
  /**
   * No retry starts later than this after the first failure (default 30000 ms). The call then
   * fails with its last error; one more attempt may still be running when the time is up, so
   * the wall time is bounded by this plus one attempt.
   */
  readonly totalMillis: number
}

/**
 * @since 0.1.0
 * @category models
 */
export const defaults: BrokerRetryPolicy = { initialDelayMillis: 100, maxDelayMillis: 2_000, totalMillis: 30_000 }

/**
 * The policy every Kafka layer uses, whichever the driver; override it with
 * `Layer.succeed(BrokerRetry.CurrentPolicy)({ ... })` or `Effect.provideService`.
 *
 * @since 0.1.0
 * @category references
 */
export const CurrentPolicy = Context.Reference<BrokerRetryPolicy>("@effect-outbox/kafka/BrokerRetry/Policy", {
  defaultValue: () => defaults
})

/**
 * Exponential from `initialDelayMillis`, capped at `maxDelayMillis`, jittered, for at most
 * `totalMillis` after the first failure.
 *
 * @since 0.1.0
 * @category schedules
 */
export const schedule = (policy: Partial<BrokerRetryPolicy> = {}): Schedule.Schedule<Duration.Duration> => {
  const { initialDelayMillis, maxDelayMillis, totalMillis } = { ...defaults, ...policy }
  return Schedule.exponential(Duration.millis(initialDelayMillis), 2).pipe(
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.millis(maxDelayMillis)))),
    Schedule.jittered,
    Schedule.upTo({ duration: Duration.millis(totalMillis) })
  )
}

/**
 * The wall clock. The broker lives in real time: schedules that wait for it measure and sleep on
 * this clock, also when the caller runs under a TestClock (which would otherwise never let a
 * retry happen).
 *
 * @since 0.1.0
 * @category clocks
 */
export const liveClock: Clock.Clock = Clock.Clock.defaultValue()

/**
 * Retries `self` while `isRetriable` (default the protocol's `isRetriableBrokerCall`), on
 * `schedule(CurrentPolicy)`. Each retry is logged at debug with the operation's name and the error.
 *
 * @since 0.1.0
 * @category combinators
 */
export const retrying =
  <E>(protocol: Protocol, operation: string, isRetriable: (error: E) => boolean = protocol.isRetriableBrokerCall) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.gen(function* () {
      const policy = yield* CurrentPolicy
      let attempt = 0
      return yield* self.pipe(
        Effect.tapError((error) =>
          isRetriable(error)
            ? Effect.logDebug(`kafka ${operation}: attempt ${++attempt} failed, retrying: ${protocol.describe(error)}`)
            : Effect.void
        ),
        Effect.retry({ schedule: schedule(policy), while: isRetriable }),
        Effect.provideService(Clock.Clock, liveClock)
      )
    })

/**
 * A promise-returning broker call, retried as `retrying` says; fails with the client's raw error
 * (callers map it to their typed error, after classifying it if they need to).
 *
 * @since 0.1.0
 * @category combinators
 */
export const brokerCall = <A>(
  protocol: Protocol,
  operation: string,
  call: () => Promise<A>
): Effect.Effect<A, unknown> =>
  Effect.tryPromise({ try: call, catch: (error) => error }).pipe(retrying(protocol, operation))
