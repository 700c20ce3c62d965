/**
 * Health of a running outbox, for orchestrators' probes.
 *
 * - **live**: the process should keep running. It answers `ok` for as long as the runtime is up,
 *   through the database and broker outages the library rides out on its own (restarting the
 *   process would not help them); it turns unhealthy once the runtime is shutting down.
 * - **ready**: the process can do its work now: the database answers, the broker answers (when
 *   a `BrokerAdmin` that lists topics is provided), its relays run (a claim relay has claimed
 *   within the last 2 minutes, as its loop does every poll interval; a log relay counts while it
 *   publishes or waits for the lease as a standby), the log engine's slot lag stays under its
 *   limit while this process runs the log relay, and each of its consumers runs rather than
 *   waiting to be restarted after an error.
 *
 * `OutboxRuntime` builds it and, with `OUTBOX_HEALTH_PORT`, serves both as JSON on `/healthz`
 * and `/readyz` (see {@link render}).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import type { LogGauges } from "./LogSource.ts"
import type { EventId } from "./OutboxMessage.ts"
import { OutboxStore } from "./OutboxStore.ts"

/**
 * One verdict: what was checked, whether it passed, and what an operator reads.
 *
 * @since 0.1.0
 * @category models
 */
export interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Report {
  readonly ok: boolean
  readonly checks: ReadonlyArray<Check>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Health extends Context.Service<
  Health,
  {
    readonly live: Effect.Effect<Report>
    readonly ready: Effect.Effect<Report>
  }
>()("@effect-outbox/core/Health") {}

/**
 * The health server could not listen (the port is taken, the address is not this machine's).
 *
 * @since 0.1.0
 * @category errors
 */
export class HealthServerError extends Schema.TaggedError<HealthServerError>()("HealthServerError", {
  host: Schema.String,
  port: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `the health server cannot listen on ${this.host}:${this.port} (OUTBOX_HEALTH_HOST, OUTBOX_HEALTH_PORT): ${this.reason}`
  }
}

/**
 * A relay the checks watch: a claim relay claims at least every poll interval, so a last claim
 * long ago means its loop is stuck.
 *
 * @since 0.1.0
 * @category models
 */
export interface RelayProgress {
  readonly owner: string
  /** When it last claimed (a claim relay; the log relay has none). */
  readonly lastClaimAt?: Effect.Effect<number> | undefined
}

/**
 * What the runtime tells the checks about its own workers.
 *
 * @since 0.1.0
 * @category models
 */
export interface Workers {
  /** The relays started here (`[]` when this process runs none). */
  readonly relays: ReadonlyArray<RelayProgress>
  /** Each consumer group and, while it waits to be restarted, why it stopped. */
  readonly consumers: Effect.Effect<ReadonlyArray<{ readonly groupId: string; readonly stopped: string | undefined }>>
  /** Set once the runtime has begun to shut down. */
  readonly stopping: Effect.Effect<boolean>
  /** The log engine's slot, while this process runs its log relay: lag over `maxLagBytes` is not ready. */
  readonly slot?: { readonly gauges: Effect.Effect<LogGauges, unknown>; readonly maxLagBytes: number } | undefined
}

// A primary-key lookup of an id no row has: the cheapest question that needs the database.
/**
 * The id the database check looks up: the nil UUID, which no event has, so the lookup costs one
 * primary-key probe and reads no row.
 *
 * @since 0.1.0
 * @category constants
 */
export const probeEventId = "00000000-0000-0000-0000-000000000000" as EventId

const message = (error: unknown) =>
  typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)

const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MiB`

const slotVerdict = (gauges: LogGauges, maxLagBytes: number): { readonly ok: boolean; readonly detail: string } =>
  gauges.walStatus === "lost"
    ? { ok: false, detail: "the slot's WAL was removed (wal_status lost): see docs/log-relay-operations.md" }
    : gauges.lagBytes > maxLagBytes
      ? {
          ok: false,
          detail: `lag ${mib(gauges.lagBytes)} over ${mib(maxLagBytes)} (OUTBOX_HEALTH_MAX_SLOT_LAG_BYTES)`
        }
      : { ok: true, detail: `lag ${mib(gauges.lagBytes)} (limit ${mib(maxLagBytes)})` }

const timed = (name: string, timeout: Duration.Duration, effect: Effect.Effect<string, unknown>) =>
  effect.pipe(
    Effect.map((detail): Check => ({ name, ok: true, detail })),
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () => Effect.succeed<Check>({ name, ok: false, detail: `no answer within ${Duration.format(timeout)}` })
    }),
    Effect.catch((error) => Effect.succeed<Check>({ name, ok: false, detail: message(error) }))
  )

/**
 * The checks over the store, the broker (when `BrokerAdmin` can list topics) and `workers`; the
 * database and broker checks each give up after `timeout`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  workers: Workers,
  options: {
    readonly timeout: Duration.Duration
    /** How long a claim relay may go without claiming before it counts as stuck (default 2 minutes). */
    readonly relayStallAfter?: Duration.Duration | undefined
  }
): Effect.Effect<Health["Service"], never, OutboxStore> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const admin = yield* Effect.serviceOption(BrokerAdmin)
    const listTopics = Option.getOrUndefined(admin)?.listTopics
    const database = timed(
      "database",
      options.timeout,
      Effect.as(
        Effect.suspend(() => store.get(probeEventId)),
        "answers"
      )
    )
    const broker =
      listTopics === undefined
        ? Effect.succeed<Check>({ name: "broker", ok: true, detail: "not checked (no BrokerAdmin listing topics)" })
        : timed(
            "broker",
            options.timeout,
            Effect.map(listTopics, (topics) => `answers (${topics.length} topics)`)
          )
    const started = yield* Clock.currentTimeMillis
    const stallMillis = Duration.toMillis(options.relayStallAfter ?? Duration.minutes(2))
    const relay = (r: RelayProgress) =>
      Effect.gen(function* () {
        if (r.lastClaimAt === undefined) {
          return {
            name: `relay ${r.owner}`,
            ok: true,
            detail: "running (publishing, or a standby waiting for the lease)"
          }
        }
        const idle = (yield* Clock.currentTimeMillis) - Math.max(started, yield* r.lastClaimAt)
        return idle > stallMillis
          ? {
              name: `relay ${r.owner}`,
              ok: false,
              detail: `no claim for ${Math.round(idle / 1000)} s: its loop is stuck`
            }
          : { name: `relay ${r.owner}`, ok: true, detail: "running" }
      })
    const relays = Effect.forEach(workers.relays, relay)
    const consumers = Effect.map(workers.consumers, (groups) =>
      groups.map(
        ({ groupId, stopped }): Check => ({
          name: `consumer ${groupId}`,
          ok: stopped === undefined,
          detail: stopped === undefined ? "running" : `stopped, restarting: ${stopped}`
        })
      )
    )
    const stopping = Effect.map(
      workers.stopping,
      (yes): Check => ({ name: "runtime", ok: !yes, detail: yes ? "shutting down" : "running" })
    )
    const slot = workers.slot
    // A slot that answers but holds back too much fails the check with the verdict as its detail.
    const slotLag =
      slot === undefined
        ? Effect.succeed<ReadonlyArray<Check>>([])
        : Effect.map(
            timed(
              "log slot",
              options.timeout,
              Effect.flatMap(slot.gauges, (gauges) => {
                const verdict = slotVerdict(gauges, slot.maxLagBytes)
                return verdict.ok ? Effect.succeed(verdict.detail) : Effect.fail(verdict.detail)
              })
            ),
            (check): ReadonlyArray<Check> => [check]
          )
    const report = (checks: ReadonlyArray<Check>): Report => ({ ok: checks.every((c) => c.ok), checks })
    return {
      live: Effect.map(stopping, (check) => report([check])),
      ready: Effect.map(
        Effect.all([stopping, database, broker, relays, consumers, slotLag], { concurrency: "unbounded" }),
        ([runtime, db, kafka, loops, groups, lag]) =>
          report([
            runtime,
            db,
            kafka,
            ...(loops.length === 0 ? [{ name: "relay", ok: true, detail: "none in this process" }] : loops),
            ...lag,
            ...groups
          ])
      )
    }
  })

/**
 * `outbox_health_check` (attribute `check`, the check's name): `1` while the check passes, `0`
 * while it fails. The runtime sets it from the readiness checks every metrics interval once health
 * is asked for (it serves the health port, or its `Health` service was used), so an alert can name
 * the failing check without scraping the probe. A runtime nobody asks for health runs no checks
 * in the background (the broker check opens an admin connection).
 *
 * @since 0.1.0
 * @category metrics
 */
export const checkGauge = Metric.gauge("outbox_health_check", {
  description:
    "1 while the named health check passes, 0 while it fails (sampled every metrics interval once health is asked for)"
})

/**
 * Sets {@link checkGauge} from a report, one series per check.
 *
 * @since 0.1.0
 * @category metrics
 */
export const record = (report: Report): Effect.Effect<void> =>
  Effect.forEach(
    report.checks,
    (check) => Metric.update(Metric.withAttributes(checkGauge, { check: check.name }), check.ok ? 1 : 0),
    { discard: true }
  )

/**
 * The HTTP answer for a report: `200` when it passes, `503` when not, the report as JSON.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (report: Report): { readonly status: number; readonly body: string } => ({
  status: report.ok ? 200 : 503,
  body: JSON.stringify({ status: report.ok ? "ok" : "unavailable", checks: report.checks })
})
