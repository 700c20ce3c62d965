/**
 * The runtime's gauges: the outbox rows sampled from the store, and (with `BrokerAdmin`) the
 * running consumers' lag and dead-letter depth read from the broker, every metrics interval.
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { BrokerAdmin } from "../../BrokerAdmin.ts"
import * as DeadLetter from "../../DeadLetter.ts"
import * as DeadLetterDepth from "../../DeadLetterDepth.ts"
import type { StoreError } from "../../Errors.ts"
import * as Lifecycle from "../../Lifecycle.ts"
import { OutboxStore } from "../../OutboxStore.ts"
import * as Telemetry from "../../Telemetry.ts"
import * as Jobs from "../jobs.ts"

/** What the broker-side gauges need of a declared consumer. */
export interface Sampled {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning?: boolean | undefined
  readonly deadLetterTopic?: ((topic: string) => string) | undefined
}

/** Samples the store once into the outbox gauges (`OutboxRuntime.sampleMetrics`). */
export const sampleStore: Effect.Effect<void, StoreError, OutboxStore> = Effect.gen(function* () {
  const store = yield* OutboxStore
  const now = yield* Clock.currentTimeMillis
  const stats = yield* store.stats(now)
  const count = (status: Lifecycle.OutboxStatus) => stats.byStatus[status] ?? 0
  yield* Metric.update(Telemetry.pending, count("PENDING"))
  yield* Metric.update(
    Telemetry.oldestPendingAge,
    stats.oldestPendingCreatedAt === null ? 0 : Math.max(0, now - stats.oldestPendingCreatedAt)
  )
  yield* Metric.update(Telemetry.staleLeases, stats.staleLeases)
  if (stats.blockedKeys !== undefined) yield* Metric.update(Telemetry.blockedKeys, stats.blockedKeys)
  yield* Metric.update(
    Telemetry.unfinished,
    Lifecycle.statuses.filter(Lifecycle.isUnfinished).reduce((n, status) => n + count(status), 0)
  )
  for (const status of Lifecycle.statuses) {
    yield* Metric.update(Metric.withAttributes(Telemetry.eventsByStatus, { status }), count(status))
  }
})

/** Consumer lag from the broker's committed offsets (true also while a consumer is stuck), and
 * the dead letters not yet replayed per dead-letter topic. Failures are logged. */
const sampleBroker = (running: ReadonlyArray<Sampled>): Effect.Effect<void, never, BrokerAdmin> =>
  Effect.andThen(
    Effect.forEach(
      running,
      (declaration) =>
        Telemetry.sampleConsumerLag(declaration).pipe(
          Effect.catch((error) =>
            Effect.logDebug(`consumer lag sample of ${declaration.groupId} failed: ${error.message}`)
          )
        ),
      { discard: true }
    ),
    Effect.forEach(
      deadLetterTopics(running),
      (topic) =>
        DeadLetterDepth.sample(topic).pipe(
          Effect.catch((error) => Effect.logDebug(`dead-letter depth of ${topic} failed: ${error.message}`))
        ),
      { discard: true }
    )
  )

/** The dead-letter topics of `declarations`, each once. */
const deadLetterTopics = (declarations: ReadonlyArray<Sampled>): ReadonlyArray<string> => [
  ...new Set(
    declarations.flatMap((d) => d.topics.map((topic) => (d.deadLetterTopic ?? DeadLetter.defaultTopic)(topic)))
  )
]

/**
 * Starts the sampling jobs in the current scope; the store's unless `store` is false (the log
 * engine has no outbox rows to count), the broker's only when `BrokerAdmin` is provided.
 */
export const start = (
  interval: Duration.Duration,
  running: ReadonlyArray<Sampled>,
  store = true
): Effect.Effect<void, never, OutboxStore | Scope.Scope> =>
  Effect.gen(function* () {
    if (store) {
      yield* Effect.forkScoped(
        Jobs.every(
          interval,
          sampleStore.pipe(Effect.catch((error) => Effect.logDebug(`outbox metrics sample failed: ${error.message}`)))
        )
      )
    }
    const admin = yield* Effect.serviceOption(BrokerAdmin)
    if (Option.isSome(admin) && running.length > 0) {
      yield* Effect.forkScoped(
        Jobs.every(interval, sampleBroker(running)).pipe(Effect.provideService(BrokerAdmin, admin.value))
      )
    }
  })
