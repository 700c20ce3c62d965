/**
 * The one retry policy for the adapter's broker calls besides sends: metadata, admin and group
 * offsets, the probe's and the topic reader's offset lookups and consumer start, topic creation,
 * a consumer group subscription. A broker formatted seconds ago, a group coordinator still
 * loading, a leader being elected, a connection refused for a moment: asked again a little
 * later, these calls succeed. Errors `KafkaErrors.isRetriableBrokerCall` accepts are retried on
 * an exponential, jittered, capped `Schedule` for a bounded total time; anything else, and the
 * last error once the time is up, reaches the caller, which maps it to its typed error.
 *
 * kafkajs retries inside each call as well (its `retry` setting); this policy covers what
 * outlasts those retries, such as a coordinator that takes longer to load than kafkajs waits.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { dual } from "effect/Function"
import * as Schedule from "effect/Schedule"
import { describe, isRetriableBrokerCall } from "./KafkaErrors.ts"

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
   * the wall time is bounded by this plus one attempt (kafkajs's own request retries).
   */
  readonly totalMillis: number
}

/**
 * @since 0.1.0
 * @category models
 */
export const defaults: BrokerRetryPolicy = { initialDelayMillis: 100, maxDelayMillis: 2_000, totalMillis: 30_000 }

/**
 * The policy every Kafka layer uses; override it with
 * `Layer.succeed(KafkaRetry.CurrentPolicy)({ ... })` or `Effect.provideService`.
 *
 * @since 0.1.0
 * @category references
 */
export const CurrentPolicy = Context.Reference<BrokerRetryPolicy>("@effect-outbox/adapter-kafka/KafkaRetry/Policy", {
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

// The broker lives in real time: the schedule measures its bound and sleeps on the wall clock,
// also when the caller runs under a TestClock (which would otherwise never let a retry happen).
const liveClock = Clock.Clock.defaultValue()

/**
 * @since 0.1.0
 * @category models
 */
export interface RetryingOptions<E> {
  /** Which errors to retry (default `KafkaErrors.isRetriableBrokerCall`). */
  readonly isRetriable?: ((error: E) => boolean) | undefined
}

/**
 * Retries `self` while its error is retriable by `isRetriable` (default
 * `KafkaErrors.isRetriableBrokerCall`), on `schedule(CurrentPolicy)`. Each retry is logged at
 * debug with the operation's name and the error.
 *
 * @since 0.1.0
 * @category combinators
 */
export const retrying: {
  <E>(operation: string, options?: RetryingOptions<E>): <A, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, operation: string, options?: RetryingOptions<E>): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, operation: string, options?: RetryingOptions<E>): Effect.Effect<A, E, R> =>
    Effect.gen(function* () {
      const policy = yield* CurrentPolicy
      const isRetriable = options?.isRetriable ?? isRetriableBrokerCall
      let attempt = 0
      return yield* self.pipe(
        Effect.tapError((error) =>
          isRetriable(error)
            ? Effect.logDebug(`kafka ${operation}: attempt ${++attempt} failed, retrying: ${describe(error)}`)
            : Effect.void
        ),
        Effect.retry({ schedule: schedule(policy), while: isRetriable }),
        Effect.provideService(Clock.Clock, liveClock)
      )
    })
)

/**
 * A kafkajs call, retried as `retrying` says; fails with the raw kafkajs error (callers map it
 * to their typed error, after classifying it if they need to).
 *
 * @since 0.1.0
 * @category constructors
 */
export const brokerCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, unknown> =>
  retrying(Effect.tryPromise({ try: call, catch: (error) => error }), operation)
