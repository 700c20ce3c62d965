/**
 * The readiness checks as gauges (`outbox_health_check`), sampled every metrics interval, but
 * only once health is asked for: the health server serves it, or someone uses the runtime's
 * `Health` service. A process that does neither never runs the checks in the background, so it
 * opens no broker admin connection every interval for a gauge nobody reads.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Health from "../../Health.ts"
import * as Jobs from "../jobs.ts"

export interface HealthSampling {
  /** Starts the sampling (once; later calls do nothing). */
  readonly start: Effect.Effect<void>
  /** `health`, starting the sampling on its first use. */
  readonly health: Health.Health["Service"]
}

/**
 * Sampling of `health` every `interval` (never when `false`), on the runtime's scope and context
 * whoever starts it.
 */
export const make = (
  health: Health.Health["Service"],
  interval: Duration.Duration | false
): Effect.Effect<HealthSampling, never, Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<never>()
    let started = interval === false
    const job = interval === false ? Effect.void : Jobs.every(interval, Effect.flatMap(health.ready, Health.record))
    const start = Effect.suspend(() => {
      if (started) return Effect.void
      // No yield between the look and the set: one sampling fiber however many ask at once.
      started = true
      // A scope already closed (asked after shutdown) gets an interrupted fiber: nothing runs.
      return Effect.asVoid(Effect.forkIn(Effect.provideContext(job, context), scope))
    })
    return {
      start,
      health: { live: Effect.andThen(start, health.live), ready: Effect.andThen(start, health.ready) }
    }
  })
