/**
 * What the runtime checks on the broker before it starts anything: that the brokers answer
 * within a bounded time, and that every topic its consumers read and every dead-letter topic they
 * write exists. A missing one fails start-up with one `MissingTopicsError` that names them and
 * the command that creates them, or is created here when `autoCreateTopics` says so.
 *
 * Runs only when a `BrokerAdmin` with `listTopics` is provided (both Kafka adapters have it).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import * as DeadLetter from "./DeadLetter.ts"
import { type BrokerAdminError, BrokerSecurityError, BrokerUnreachableError, MissingTopicsError } from "./Errors.ts"
import * as Vars from "./internal/variables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** How long to wait for the brokers' first answer; `false` skips the whole check. */
  readonly timeout: false | Duration.Duration
  /** Create missing topics (a dead-letter topic with its source's partition count, others with 1). */
  readonly autoCreateTopics: boolean
}

/**
 * A topic the runtime needs, and for a dead-letter topic the topic it collects.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequiredTopic {
  readonly topic: string
  readonly deadLetterOf?: string | undefined
}

/**
 * The topics the declared consumers read, then their dead-letter topics, each once.
 *
 * @since 0.1.0
 * @category utils
 */
export const requiredTopics = (
  declared: ReadonlyArray<{
    readonly topics: ReadonlyArray<string>
    readonly deadLetterTopic?: ((topic: string) => string) | undefined
  }>
): ReadonlyArray<RequiredTopic> => {
  const out = new Map<string, RequiredTopic>()
  for (const declaration of declared) for (const topic of declaration.topics) out.set(topic, { topic })
  for (const declaration of declared) {
    const dlt = declaration.deadLetterTopic ?? DeadLetter.defaultTopic
    for (const topic of declaration.topics) {
      const name = dlt(topic)
      if (!out.has(name)) out.set(name, { topic: name, deadLetterOf: topic })
    }
  }
  return [...out.values()]
}

/**
 * `OUTBOX_BROKER_STARTUP_TIMEOUT`: a duration (default `10 seconds`), or `off` to skip the check.
 *
 * @since 0.1.0
 * @category config
 */
export const timeoutConfig: Config.Config<false | Duration.Duration> = Vars.runtime.brokerStartupTimeout.config

// The broker lives in real time, also for a runtime built under a TestClock.
const liveClock = Clock.Clock.defaultValue()

/**
 * Lists the broker's topics, retried until `timeout` has passed; fails with the last cause. A
 * refused connection (credentials, certificates) stops at once with `BrokerSecurityError`: no
 * retry can fix it.
 *
 * @since 0.1.0
 * @category operations
 */
export const listTopics = (
  listTopics: Effect.Effect<ReadonlyArray<string>, BrokerAdminError>,
  brokers: string,
  timeout: Duration.Duration
): Effect.Effect<ReadonlyArray<string>, BrokerUnreachableError | BrokerSecurityError> =>
  Effect.suspend(() => {
    let last = "no answer"
    const waitedMillis = Duration.toMillis(timeout)
    return listTopics.pipe(
      Effect.mapError((error) =>
        error.security === undefined
          ? error
          : new BrokerSecurityError({ brokers, security: error.security, reason: error.reason })
      ),
      // Remember why, pause, ask again: until the timeout interrupts or the brokers refuse us.
      Effect.tapError((error) =>
        error._tag === "BrokerSecurityError"
          ? Effect.void
          : Effect.andThen(
              Effect.sync(() => {
                last = error.reason
              }),
              Effect.sleep("250 millis")
            )
      ),
      Effect.retry({ while: (error): boolean => error._tag !== "BrokerSecurityError" }),
      Effect.catchTag("BrokerAdminError", (error) =>
        Effect.fail(new BrokerUnreachableError({ brokers, waitedMillis, reason: error.reason }))
      ),
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.fail(new BrokerUnreachableError({ brokers, waitedMillis, reason: last }))
      }),
      Effect.provideService(Clock.Clock, liveClock)
    )
  })

/**
 * The check (see the module's description). `declared` are the consumers that will run here.
 *
 * @since 0.1.0
 * @category operations
 */
export const run = (
  declared: ReadonlyArray<{
    readonly topics: ReadonlyArray<string>
    readonly deadLetterTopic?: ((topic: string) => string) | undefined
  }>,
  options: Options
): Effect.Effect<void, BrokerUnreachableError | BrokerSecurityError | MissingTopicsError | BrokerAdminError> =>
  Effect.gen(function* () {
    if (options.timeout === false) return
    const found = yield* Effect.serviceOption(BrokerAdmin)
    if (Option.isNone(found) || found.value.listTopics === undefined) return
    const admin = found.value
    const brokers = admin.brokers?.join(",") ?? "(unknown)"
    const existing = new Set(yield* listTopics(admin.listTopics!, brokers, options.timeout))
    const missing = requiredTopics(declared).filter((required) => !existing.has(required.topic))
    if (missing.length === 0) return
    if (!options.autoCreateTopics) {
      return yield* new MissingTopicsError({ topics: missing.map((m) => m.topic), brokers })
    }
    // Sources first, so a dead-letter topic can take its source's partition count.
    const ordered = [...missing].sort(
      (a, b) => Number(a.deadLetterOf !== undefined) - Number(b.deadLetterOf !== undefined)
    )
    for (const required of ordered) {
      const partitions =
        required.deadLetterOf === undefined
          ? 1
          : Option.getOrElse(yield* admin.partitionCount(required.deadLetterOf), () => 1)
      yield* admin.ensureTopic({ topic: required.topic, partitions })
      yield* Effect.logInfo(
        `created topic ${required.topic} with ${partitions} partition(s) (OUTBOX_AUTO_CREATE_TOPICS)`
      )
    }
  }).pipe(Effect.withSpan("outbox.startupCheck"))
