/**
 * Retries broker calls other than sends while the broker is unreachable or still starting, on
 * the same schedule as the kafkajs adapter's `KafkaRetry` (exponential, jittered, bounded).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { describe, isRetriableBrokerCall } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface BrokerRetryPolicy {
  readonly initialDelayMillis: number
  readonly maxDelayMillis: number
  readonly totalMillis: number
}

/**
 * @since 0.1.0
 * @category defaults
 */
export const defaults: BrokerRetryPolicy = { initialDelayMillis: 100, maxDelayMillis: 2_000, totalMillis: 30_000 }

/**
 * @since 0.1.0
 * @category references
 */
export const CurrentPolicy = Context.Reference<BrokerRetryPolicy>(
  "@effect-outbox/adapter-kafka-platformatic/PlatformaticRetry/Policy",
  { defaultValue: () => defaults }
)

const schedule = (policy: BrokerRetryPolicy): Schedule.Schedule<Duration.Duration> =>
  Schedule.exponential(Duration.millis(policy.initialDelayMillis), 2).pipe(
    Schedule.modifyDelay(({ duration }) =>
      Effect.succeed(Duration.min(duration, Duration.millis(policy.maxDelayMillis)))
    ),
    Schedule.jittered,
    Schedule.upTo({ duration: Duration.millis(policy.totalMillis) })
  )

// The broker lives in real time, also under a TestClock.
const liveClock = Clock.Clock.defaultValue()

/**
 * Retries `self` while `isRetriable` (default: `isRetriableBrokerCall`).
 *
 * @since 0.1.0
 * @category combinators
 */
export const retrying =
  <E>(operation: string, isRetriable: (error: E) => boolean = isRetriableBrokerCall) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.gen(function* () {
      const policy = yield* CurrentPolicy
      return yield* self.pipe(
        Effect.tapError((error) =>
          isRetriable(error) ? Effect.logDebug(`kafka ${operation} failed, retrying: ${describe(error)}`) : Effect.void
        ),
        Effect.retry({ schedule: schedule(policy), while: isRetriable }),
        Effect.provideService(Clock.Clock, liveClock)
      )
    })

/**
 * A promise-returning broker call, retried while retriable.
 *
 * @since 0.1.0
 * @category combinators
 */
export const brokerCall = <A>(operation: string, call: () => Promise<A>): Effect.Effect<A, unknown> =>
  Effect.tryPromise({ try: call, catch: (error) => error }).pipe(retrying(operation))
