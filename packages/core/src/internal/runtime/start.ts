/**
 * What the runtime starts, in order, for the life of its scope: the start-up checks, then
 * retention, recovery, relays and consumers (finalizers run in reverse: consumers stop first).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Health from "../../Health.ts"
import { LogSource } from "../../LogSource.ts"
import type { ConsumerDeclaration, Settings } from "../../OutboxRuntimeSettings.ts"
import * as Reconciler from "../../Reconciler.ts"
import * as Retention from "../../Retention.ts"
import * as StaleRecovery from "../../StaleRecovery.ts"
import * as StartupCheck from "../../StartupCheck.ts"
import { StorageLocation } from "../../StorageLocation.ts"
import { DefaultExpiredPolicy } from "../consumer/options.ts"
import * as Engine from "./engine.ts"
import * as Groups from "./groups.ts"
import * as HealthSampling from "./healthSampling.ts"
import * as HealthServer from "./healthServer.ts"
import * as Sampling from "./sampling.ts"
import * as UnknownVariables from "./unknownVariables.ts"
import * as Workers from "./workers.ts"

export const start = <R>(settings: Settings, declared: ReadonlyArray<ConsumerDeclaration<R>>) =>
  Effect.gen(function* () {
    yield* UnknownVariables.warnUnknown
    const running = settings.runConsumers ? declared : []
    // Before anything starts: an unreachable broker or a missing topic fails here, once.
    yield* StartupCheck.run(running, {
      timeout: settings.brokerStartupTimeout,
      autoCreateTopics: settings.autoCreateTopics
    })
    // Logged when every finalizer below has run: finalizers run in reverse, this one last.
    yield* Effect.addFinalizer(() => Effect.logInfo("outbox runtime stopped"))
    // The log engine has no rows: nothing goes stale, nothing is left to reconcile, no group
    // drives a lifecycle.
    const claim = settings.engine === "claim"
    const drivers = claim ? running.filter((declaration) => declaration.lifecycle !== false) : []
    // A second driving group (here or in another process) is refused.
    yield* Groups.registerDrivers(drivers)
    yield* Groups.logStartOffsets(running)
    // Finalizers run in reverse: consumers stop first, then relays, then recovery and retention.
    if (settings.retention !== false) yield* Retention.start(settings.retention)
    // Same batches and schedule as the outbox's retention (its defaults when that is off). With
    // inbox retention off the rounds still run and forget nothing: a store that keeps records
    // in partitions creates the ones ahead in them.
    yield* Retention.startInbox(
      settings.inboxRetention === false ? Duration.infinity : settings.inboxRetention,
      settings.retention === false ? {} : settings.retention
    )
    if (claim && settings.staleRecovery !== false) yield* StaleRecovery.start(settings.staleRecovery)
    if (settings.reconciler !== false && drivers.length > 0) yield* Reconciler.start(drivers, settings.reconciler)
    const progress: ReadonlyArray<Health.RelayProgress> =
      settings.relay === false
        ? []
        : claim
          ? yield* Workers.startRelays(settings.relay)
          : (yield* Engine.startLogRelay(settings.logRelay ?? {})).map((owner) => ({ owner }))
    const relays = progress.map((relay) => relay.owner)
    const states: Workers.ConsumerStates = yield* Ref.make<ReadonlyMap<string, string | undefined>>(new Map())
    const consumers = yield* Workers.superviseConsumers(
      running.map((declaration) => ({
        ...declaration,
        run: Effect.provideService(
          Engine.consumerRun(settings.engine, declaration.run),
          DefaultExpiredPolicy,
          settings.onExpired
        )
      })),
      settings.consumerRestart,
      states
    )
    if (settings.metricsInterval !== false) yield* Sampling.start(settings.metricsInterval, running, claim)
    const location = yield* StorageLocation
    yield* Effect.logInfo(
      `outbox runtime started (${settings.engine} engine)${location === undefined ? "" : ` on ${location}`}: ${relays.length} relay(s), ${consumers.length} consumer(s)` +
        `, stale recovery ${!claim || settings.staleRecovery === false ? "off" : "on"}` +
        `, reconciler ${settings.reconciler === false || drivers.length === 0 ? "off" : "on"}, retention ${settings.retention === false ? "off" : "on"}`
    )
    // Added last, so it runs first: from the first step of shutdown on, the process is not live.
    const stopping = yield* Ref.make(false)
    yield* Effect.addFinalizer(() => Ref.set(stopping, true))
    // The log relay's slot: its lag is part of readiness where the relay runs.
    const source = yield* Effect.serviceOption(LogSource)
    const gauges = claim || progress.length === 0 ? undefined : Option.getOrUndefined(source)?.gauges
    const health = yield* Health.make(
      {
        relays: progress,
        consumers: Effect.map(Ref.get(states), (all) => [...all].map(([groupId, stopped]) => ({ groupId, stopped }))),
        stopping: Ref.get(stopping),
        slot:
          gauges === undefined ? undefined : { gauges, maxLagBytes: settings.health.maxSlotLagBytes ?? 1_073_741_824 }
      },
      { timeout: settings.health.timeout }
    )
    // The checks as gauges, on the same interval as the other samples, from the first time
    // health is asked for: at once when the health server runs.
    const sampling = yield* HealthSampling.make(health, settings.metricsInterval)
    const healthPort =
      settings.health.port === undefined
        ? undefined
        : (yield* HealthServer.serve(health, { port: settings.health.port, host: settings.health.host })).port
    if (healthPort !== undefined) yield* sampling.start
    return { settings, relays, consumers, health: sampling.health, healthPort }
  })
