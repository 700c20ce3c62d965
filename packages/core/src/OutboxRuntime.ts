/**
 * The all-in-one layer: everything a service runs beside its domain code, composed once.
 *
 * - the domain-facing services: `Outbox` (enqueue in the caller's transaction) and `Inbox`
 *   (`processOnce`);
 * - `relay.instances` relays publishing the outbox, woken by `WakeUp`, and stale-dispatch
 *   recovery; or, with `OUTBOX_ENGINE=log` (`OutboxEngine`), the log relay reading the WAL;
 * - retention of finished rows and old inbox records;
 * - the consumers the service declares ({@link consumer}), each supervised: a consumer that stops
 *   on an error (a dead-letter topic refusing records, a lost broker) is started again after a
 *   backoff instead of silently leaving its partitions unread.
 *
 * Every setting not given explicitly is read from `Config` (environment variables by default),
 * so the same service is tuned per deployment without a code change. Closing the layer shuts
 * down gracefully: consumers stop fetching, finish the records in flight and commit; relays stop
 * claiming and finish (or hand back) their batch; recovery and retention stop last.
 *
 * Domain code receives `Outbox` and `Inbox` only. The broker ports (`Publisher`, …) are inputs of
 * this layer, not outputs: provide them with `Layer.provide` and publishing around the outbox
 * does not type-check.
 *
 * ```ts
 * const Runtime = OutboxRuntime.layer({
 *   consumers: [OutboxRuntime.consumer(Topic.consumer(Orders, { groupId: "billing", handler: bill }))]
 * }).pipe(
 *   Layer.provide(KafkaOutbox.layerConfig()), // the publisher stays inside the runtime
 *   Layer.provideMerge(PgOutbox.layerConfig) // your code shares the SqlClient and its transactions
 * )
 * ```
 *
 * @since 0.1.0
 */

import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Schema from "effect/Schema"
import type { BrokerProbe } from "./BrokerProbe.ts"
import * as Consumer from "./Consumer.ts"
import type { ConsumerSource } from "./ConsumerSource.ts"
import { LifecycleGroupConflictError, type OutboxStoreError, type OutboxValidationError } from "./Errors.ts"
import * as Inbox from "./Inbox.ts"
import type { InboxStore } from "./InboxStore.ts"
import * as Engine from "./internal/runtime/engine.ts"
import * as Sampling from "./internal/runtime/sampling.ts"
import * as Workers from "./internal/runtime/workers.ts"
import type * as LogRelay from "./LogRelay.ts"
import * as Outbox from "./Outbox.ts"
import * as OutboxEngine from "./OutboxEngine.ts"
import type { OutboxStore } from "./OutboxStore.ts"
import type { Publisher } from "./Publisher.ts"
import * as Reconciler from "./Reconciler.ts"
import * as Relay from "./Relay.ts"
import * as Retention from "./Retention.ts"
import * as StaleRecovery from "./StaleRecovery.ts"
import * as Telemetry from "./Telemetry.ts"
import type { Transactor } from "./Transactor.ts"
import type { WakeUp } from "./WakeUp.ts"

/**
 * A consumer the service runs for the life of the runtime.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsumerDeclaration<R> {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  /** Whether a new group starts at the beginning (how its lag counts before its first commit). */
  readonly fromBeginning?: boolean | undefined
  /**
   * Whether it drives the outbox lifecycle of its topics' rows (`Consumer.Options.lifecycle`,
   * default on): the reconciler sweeps for it, and at most one such group per topic.
   */
  readonly lifecycle?: boolean | undefined
  /** Its dedupe identity (default `"event-id"`), for the reconciler's inbox look-up. */
  readonly identity?: Inbox.IdentityStrategy | undefined
  /** Its dead-letter topic per topic (default `<topic>.DLT`), for the dead-letter depth gauge. */
  readonly deadLetterTopic?: ((topic: string) => string) | undefined
  /** Runs until interrupted; fails when the consumer stops on an error. */
  readonly run: Effect.Effect<never, Consumer.ConsumerError, Consumer.Requirements | R>
}

/**
 * Declares a consumer (see `Topic.consumer` for typed options).
 *
 * @since 0.1.0
 * @category constructors
 */
export const consumer = <S extends Schema.Top, E, R>(
  options: Consumer.Options<S, E, R>
): ConsumerDeclaration<R | S["DecodingServices"]> => ({
  groupId: options.groupId,
  topics: options.topics,
  fromBeginning: options.fromBeginning ?? true,
  lifecycle: options.lifecycle ?? true,
  identity: options.identity,
  deadLetterTopic: options.deadLetterTopic,
  run: Consumer.run(options)
})

export {
  /**
   * Two consumer groups drive the outbox lifecycle of one topic: the second would skip every event
   * the first finished. Exactly one group per topic may keep `lifecycle` on.
   *
   * @since 0.1.0
   * @category errors
   */
  LifecycleGroupConflictError
} from "./Errors.ts"

/**
 * Refuses declarations where more than one group drives the lifecycle of a topic.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkLifecycleGroups = (
  declared: ReadonlyArray<Pick<ConsumerDeclaration<unknown>, "groupId" | "topics" | "lifecycle">>
): Effect.Effect<void, LifecycleGroupConflictError> => {
  const drivers = new Map<string, Set<string>>()
  for (const declaration of declared) {
    if (declaration.lifecycle === false) continue
    for (const topic of declaration.topics) {
      const groups = drivers.get(topic) ?? new Set<string>()
      groups.add(declaration.groupId)
      drivers.set(topic, groups)
    }
  }
  for (const [topic, groups] of drivers) {
    if (groups.size > 1) return Effect.fail(new LifecycleGroupConflictError({ topic, groups: [...groups].sort() }))
  }
  return Effect.void
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /**
   * The relay engine (`OutboxEngine`): `claim` runs the claim relays, stale recovery and the
   * reconciler; `log` runs the log relay (one per process; the slot's lease picks the publisher)
   * and skips the consumers' lifecycle step. Consumers, retention and telemetry run on both.
   */
  readonly engine: OutboxEngine.Engine
  /** The log relay's settings (`engine: "log"`); `relay: false` runs none here either. */
  readonly logRelay?: LogRelay.Settings | undefined
  readonly outbox: Outbox.Settings
  /** `false` runs no relay in this process (another deployment publishes). */
  readonly relay: false | (Partial<Relay.Settings> & { readonly instances: number })
  readonly staleRecovery: false | Partial<StaleRecovery.Settings>
  /**
   * The sweep for rows left `UNDER_PROCESSING`, run when a declared consumer drives the
   * lifecycle here; `false` runs none.
   */
  readonly reconciler: false | Partial<Reconciler.Settings>
  readonly retention: false | Partial<Retention.Settings>
  /** Processed-message records older than this are purged with the retention rounds; `false` keeps them. */
  readonly inboxRetention: false | Duration.Duration
  /** `false` declares consumers but does not start them (a publish-only instance). */
  readonly runConsumers: boolean
  /** Delay before a stopped consumer is started again (exponential from this, capped at 1 minute). */
  readonly consumerRestart: Duration.Duration
  /**
   * How often the outbox gauges are sampled from the store, and the running consumers' lag
   * (`Telemetry.consumerLag`) and dead-letter depth (`DeadLetterDepth.pendingGauge`) from the
   * broker when `BrokerAdmin` is provided; `false` samples none.
   */
  readonly metricsInterval: false | Duration.Duration
}

/**
 * The settings from the environment, each module's own variables included:
 *
 * | variable | default | |
 * |---|---|---|
 * | `OUTBOX_ENGINE` | `claim` | `claim` or `log`, see `OutboxEngine` |
 * | `OUTBOX_RELAY_ENABLED` | `true` | run relays here |
 * | `OUTBOX_RELAY_INSTANCES` | `1` | relays in this process |
 * | `OUTBOX_RELAY_*` | see `Relay.config` | batch size, lease, poll interval, backoff, … |
 * | `OUTBOX_STALE_RECOVERY_ENABLED` | `true` | `OUTBOX_STALE_*` see `StaleRecovery.config` |
 * | `OUTBOX_RECONCILE_ENABLED` | `true` | `OUTBOX_RECONCILE_*` see `Reconciler.config` |
 * | `OUTBOX_RETENTION_ENABLED` | `true` | `OUTBOX_RETENTION_*` see `Retention.config` |
 * | `OUTBOX_INBOX_RETENTION` | `30 days` | age of purged inbox records; `off` keeps them |
 * | `OUTBOX_CONSUMERS_ENABLED` | `true` | start the declared consumers |
 * | `OUTBOX_CONSUMER_RESTART` | `1 second` | first delay before restarting a stopped consumer |
 * | `OUTBOX_METRICS_ENABLED` | `true` | sample the outbox gauges and consumer lag |
 * | `OUTBOX_METRICS_INTERVAL` | `10 seconds` | how often |
 * | `OUTBOX_MAX_RECORD_BYTES` | `1048588` | largest record (key + headers + payload), see `Outbox.config` |
 * | `OUTBOX_MAX_PARTITION` | `1023` | highest explicit partition; `sync` never grows past it (`PartitionLimit`) |
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  engine: OutboxEngine.config,
  outbox: Outbox.config,
  relayEnabled: Config.Boolean("OUTBOX_RELAY_ENABLED").pipe(Config.withDefault(true)),
  instances: Config.Int("OUTBOX_RELAY_INSTANCES").pipe(Config.withDefault(1)),
  relay: Relay.config,
  staleEnabled: Config.Boolean("OUTBOX_STALE_RECOVERY_ENABLED").pipe(Config.withDefault(true)),
  staleRecovery: StaleRecovery.config,
  reconcilerEnabled: Config.Boolean("OUTBOX_RECONCILE_ENABLED").pipe(Config.withDefault(true)),
  reconciler: Reconciler.config,
  retentionEnabled: Config.Boolean("OUTBOX_RETENTION_ENABLED").pipe(Config.withDefault(true)),
  retention: Retention.config,
  inboxRetention: Config.String("OUTBOX_INBOX_RETENTION").pipe(Config.withDefault("30 days")),
  consumers: Config.Boolean("OUTBOX_CONSUMERS_ENABLED").pipe(Config.withDefault(true)),
  consumerRestart: Config.Duration("OUTBOX_CONSUMER_RESTART").pipe(Config.withDefault(Duration.seconds(1))),
  metricsEnabled: Config.Boolean("OUTBOX_METRICS_ENABLED").pipe(Config.withDefault(true)),
  metricsInterval: Config.Duration("OUTBOX_METRICS_INTERVAL").pipe(Config.withDefault(Duration.seconds(10)))
}).pipe(
  Config.flatMap((raw): Config.Config<Settings> => {
    const off = raw.inboxRetention.trim().toLowerCase() === "off"
    const inboxRetention: Option.Option<false | Duration.Duration> = off
      ? Option.some(false)
      : Duration.fromInput(raw.inboxRetention as Duration.Input)
    if (Option.isNone(inboxRetention)) {
      return Config.fail(
        new ConfigProvider.SourceError({
          message: `OUTBOX_INBOX_RETENTION: "${raw.inboxRetention}" is neither a duration (e.g. "30 days") nor "off"`
        })
      )
    }
    if (!Number.isInteger(raw.instances) || raw.instances < 1) {
      return Config.fail(
        new ConfigProvider.SourceError({
          message: `OUTBOX_RELAY_INSTANCES must be an integer >= 1, got ${raw.instances}`
        })
      )
    }
    return Config.succeed({
      engine: raw.engine,
      outbox: raw.outbox,
      relay: raw.relayEnabled ? { ...raw.relay, instances: raw.instances } : false,
      staleRecovery: raw.staleEnabled ? raw.staleRecovery : false,
      reconciler: raw.reconcilerEnabled ? raw.reconciler : false,
      retention: raw.retentionEnabled ? raw.retention : false,
      inboxRetention: inboxRetention.value,
      runConsumers: raw.consumers,
      consumerRestart: raw.consumerRestart,
      metricsInterval: raw.metricsEnabled ? raw.metricsInterval : false
    })
  })
)

/**
 * What the runtime started, for health checks and tests.
 *
 * @since 0.1.0
 * @category services
 */
export class OutboxRuntime extends Context.Service<
  OutboxRuntime,
  {
    readonly settings: Settings
    /** Lease owner ids of the relays running here. */
    readonly relays: ReadonlyArray<string>
    /** Consumer groups running here. */
    readonly consumers: ReadonlyArray<string>
  }
>()("@effect-outbox/core/OutboxRuntime") {}

/**
 * Explicit options; anything absent comes from {@link config}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<C extends ReadonlyArray<ConsumerDeclaration<unknown>>> extends Partial<Settings> {
  readonly consumers?: C | undefined
}

// Distributes over the declarations; no declarations (never) needs nothing.
type ServicesOf<D> = D extends ConsumerDeclaration<infer R> ? R : never
type ConsumerServices<C extends ReadonlyArray<ConsumerDeclaration<unknown>>> = ServicesOf<C[number]>

/**
 * The ports the runtime needs: storage (`OutboxStore`, `InboxStore`, `Transactor`, `WakeUp`)
 * and broker (`Publisher`, `BrokerProbe`, `ConsumerSource`). `BrokerAdmin` is used when present
 * (unknown-partition "sync", consumer lag). On the log engine the runtime also needs `LogWriter`
 * and `LogSource`, looked up when it starts (`PgOutbox.layerConfig` provides them when
 * `OUTBOX_ENGINE=log`; missing, the layer fails with `OutboxEngine.LogEngineUnavailableError`).
 *
 * @since 0.1.0
 * @category models
 */
export type Ports = OutboxStore | InboxStore | Transactor | WakeUp | Publisher | BrokerProbe | ConsumerSource

/**
 * Events waiting to be published (`PENDING`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const pendingGauge = Telemetry.pending

/**
 * Age of the oldest `PENDING` event in milliseconds (0 when none waits): how far publication lags.
 *
 * @since 0.1.0
 * @category metrics
 */
export const oldestPendingAgeGauge = Telemetry.oldestPendingAge

/**
 * `DISPATCHING` rows whose lease expired (waiting for stale recovery).
 *
 * @since 0.1.0
 * @category metrics
 */
export const staleLeasesGauge = Telemetry.staleLeases

/**
 * Events committed but not yet finished by the consumer that drives the lifecycle (`PENDING`,
 * `DISPATCHING`, `PUBLISHED`, `UNDER_PROCESSING`): the pipeline's end-to-end lag, in events.
 *
 * @since 0.1.0
 * @category metrics
 */
export const unfinishedGauge = Telemetry.unfinished

/**
 * Rows per status, with attribute `status`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const statusGauge = Telemetry.eventsByStatus

/**
 * Samples the store once into the gauges.
 *
 * @since 0.1.0
 * @category metrics
 */
export const sampleMetrics: Effect.Effect<void, OutboxStoreError, OutboxStore> = Sampling.sampleStore

const start = <R>(settings: Settings, declared: ReadonlyArray<ConsumerDeclaration<R>>) =>
  Effect.gen(function* () {
    // Finalizers run in reverse: consumers stop first, then relays, then recovery and retention.
    if (settings.retention !== false) yield* Retention.start(settings.retention)
    if (settings.inboxRetention !== false) {
      // Same batches and schedule as the outbox's retention (its defaults when that is off).
      yield* Retention.startInbox(settings.inboxRetention, settings.retention === false ? {} : settings.retention)
    }
    // The log engine has no rows: nothing goes stale, nothing is left to reconcile.
    const claim = settings.engine === "claim"
    if (claim && settings.staleRecovery !== false) yield* StaleRecovery.start(settings.staleRecovery)
    const running = settings.runConsumers ? declared : []
    const drivers = claim ? running.filter((declaration) => declaration.lifecycle !== false) : []
    if (settings.reconciler !== false && drivers.length > 0) yield* Reconciler.start(drivers, settings.reconciler)
    const relays =
      settings.relay === false
        ? []
        : claim
          ? yield* Workers.startRelays(settings.relay)
          : yield* Engine.startLogRelay(settings.logRelay ?? {})
    const consumers = yield* Workers.superviseConsumers(
      running.map((declaration) => ({ ...declaration, run: Engine.consumerRun(settings.engine, declaration.run) })),
      settings.consumerRestart
    )
    if (settings.metricsInterval !== false) yield* Sampling.start(settings.metricsInterval, running, claim)
    yield* Effect.addFinalizer(() => Effect.logInfo("outbox runtime stopped"))
    yield* Effect.logInfo(
      `outbox runtime started (${settings.engine} engine): ${relays.length} relay(s), ${consumers.length} consumer(s)` +
        `, stale recovery ${!claim || settings.staleRecovery === false ? "off" : "on"}` +
        `, reconciler ${settings.reconciler === false || drivers.length === 0 ? "off" : "on"}, retention ${settings.retention === false ? "off" : "on"}`
    )
    return { settings, relays, consumers }
  })

/**
 * The runtime layer for the consumer declarations `C`: the services each declaration needs, less
 * the ones the layer provides itself, plus the {@link Ports}.
 *
 * @since 0.3.0
 * @category layers
 */
export type RuntimeLayer<C extends ReadonlyArray<ConsumerDeclaration<unknown>>> = Layer.Layer<
  Outbox.Outbox | Inbox.Inbox | OutboxRuntime,
  Config.ConfigError | OutboxValidationError | LifecycleGroupConflictError | OutboxEngine.LogEngineUnavailableError,
  Ports | Exclude<ConsumerServices<C>, Outbox.Outbox | Inbox.Inbox | OutboxRuntime>
>

/**
 * The runtime: `Outbox`, `Inbox` and `OutboxRuntime`, with relays, recovery, retention and the
 * declared consumers running for the life of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <const C extends ReadonlyArray<ConsumerDeclaration<unknown>> = readonly []>(
  options: Options<C> = {}
): RuntimeLayer<C> => {
  const settings = Effect.andThen(
    checkLifecycleGroups(options.consumers ?? []),
    Effect.map(
      config,
      (fromConfig): Settings => ({
        engine: options.engine ?? fromConfig.engine,
        logRelay: options.logRelay,
        outbox: options.outbox ?? fromConfig.outbox,
        relay: options.relay ?? fromConfig.relay,
        staleRecovery: options.staleRecovery ?? fromConfig.staleRecovery,
        reconciler: options.reconciler ?? fromConfig.reconciler,
        retention: options.retention ?? fromConfig.retention,
        inboxRetention: options.inboxRetention ?? fromConfig.inboxRetention,
        runConsumers: options.runConsumers ?? fromConfig.runConsumers,
        consumerRestart: options.consumerRestart ?? fromConfig.consumerRestart,
        metricsInterval: options.metricsInterval ?? fromConfig.metricsInterval
      })
    )
  )
  const services = Layer.unwrap(
    Effect.map(settings, (s) => Layer.mergeAll(Engine.outboxLayer(s.engine, s.outbox), Inbox.Inbox.layer))
  )
  // Each declaration needs its own services; the union of them is what the layer asks for.
  // Each element of `C` needs a member of `ConsumerServices<C>`; TypeScript cannot see it of a generic `C`.
  const declared = (options.consumers ?? []) as ReadonlyArray<ConsumerDeclaration<ConsumerServices<C>>>
  const running = Layer.effect(OutboxRuntime)(Effect.flatMap(settings, (s) => start(s, declared)))
  // Consumers use `Inbox`: the running part is built on top of the services. TypeScript cannot
  // fold the nested `Exclude`s over a generic declaration list into the one of `RuntimeLayer`:
  // the same requirements, written differently.
  return Layer.provideMerge(running, services) as RuntimeLayer<C>
}
