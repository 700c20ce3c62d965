/**
 * The all-in-one layer: everything a service runs beside its domain code, composed once.
 *
 * - the domain-facing services: `Outbox` (enqueue in the caller's transaction, opened with
 *   `Outbox.withTransaction`) and `Inbox` (`processOnce`);
 * - `relay.instances` relays publishing the outbox, woken by `WakeUp`, and stale-dispatch
 *   recovery; or, with `OUTBOX_ENGINE=log` (`OutboxEngine`), the log relay reading the WAL;
 * - retention of finished rows and old inbox records;
 * - the consumers the service declares ({@link consumer}), each supervised: a consumer that stops
 *   on an error (a dead-letter topic refusing records, a lost broker) is started again after a
 *   backoff instead of silently leaving its partitions unread.
 *
 * Before it starts anything, it checks the broker (`StartupCheck`): brokers that do not answer
 * within `OUTBOX_BROKER_STARTUP_TIMEOUT` fail the layer with `BrokerUnreachableError` (brokers that
 * refuse the credentials or certificates at once, with `BrokerSecurityError`), and the
 * consumers' missing topics and dead-letter topics with one `MissingTopicsError` (or are created,
 * with `OUTBOX_AUTO_CREATE_TOPICS`).
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
import {
  type BrokerAdminError,
  type BrokerSecurityError,
  type BrokerUnreachableError,
  LifecycleGroupConflictError,
  type MissingTopicsError,
  type OutboxValidationError,
  type StoreError
} from "./Errors.ts"
import type * as Health from "./Health.ts"
import * as Inbox from "./Inbox.ts"
import type { InboxStore } from "./InboxStore.ts"
import * as Engine from "./internal/runtime/engine.ts"
import * as Sampling from "./internal/runtime/sampling.ts"
import { start } from "./internal/runtime/start.ts"
import * as Vars from "./internal/variables.ts"
import type * as LogRelay from "./LogRelay.ts"
import * as Outbox from "./Outbox.ts"
import * as OutboxEngine from "./OutboxEngine.ts"
import type { ConsumerDeclaration, Settings } from "./OutboxRuntimeSettings.ts"
import type { OutboxStore } from "./OutboxStore.ts"
import type { Publisher } from "./Publisher.ts"
import * as Reconciler from "./Reconciler.ts"
import * as Relay from "./Relay.ts"
import * as Retention from "./Retention.ts"
import * as StaleRecovery from "./StaleRecovery.ts"
import type { Transactor } from "./Transactor.ts"
import type { WakeUp } from "./WakeUp.ts"

export type {
  /**
   * A consumer the service runs for the life of the runtime.
   *
   * @since 0.1.0
   * @category models
   */
  ConsumerDeclaration,
  /**
   * The runtime's settings (see {@link config} for the environment).
   *
   * @since 0.1.0
   * @category models
   */
  Settings
} from "./OutboxRuntimeSettings.ts"

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
   * the first finished. Exactly one group per topic may keep `lifecycle` on, across every process
   * on the outbox (`registered` names the group the database holds).
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
 * The settings from the environment, each module's own variables included: every variable, its
 * type, default and meaning is listed in docs/configuration.md (generated from the tables the
 * `Config`s are built from).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  engine: OutboxEngine.config,
  outbox: Outbox.config,
  relayEnabled: Vars.relay.enabled.config,
  instances: Vars.relay.instances.config,
  relay: Relay.config,
  staleEnabled: Vars.stale.enabled.config,
  staleRecovery: StaleRecovery.config,
  reconcilerEnabled: Vars.reconciler.enabled.config,
  reconciler: Reconciler.config,
  retentionEnabled: Vars.retention.enabled.config,
  retention: Retention.config,
  inboxRetention: Vars.retention.inbox.config,
  onExpired: Vars.retention.onExpired.config,
  consumers: Vars.runtime.consumers.config,
  consumerRestart: Vars.runtime.consumerRestart.config,
  metricsEnabled: Vars.runtime.metricsEnabled.config,
  metricsInterval: Vars.runtime.metricsInterval.config,
  brokerStartupTimeout: Vars.runtime.brokerStartupTimeout.config,
  autoCreateTopics: Vars.runtime.autoCreateTopics.config,
  healthPort: Vars.health.port.config,
  healthHost: Vars.health.host.config,
  healthTimeout: Vars.health.timeout.config,
  healthMaxSlotLag: Vars.health.maxSlotLagBytes.config
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
      onExpired: raw.onExpired,
      runConsumers: raw.consumers,
      consumerRestart: raw.consumerRestart,
      metricsInterval: raw.metricsEnabled ? raw.metricsInterval : false,
      brokerStartupTimeout: raw.brokerStartupTimeout,
      autoCreateTopics: raw.autoCreateTopics,
      health: {
        port: Option.getOrUndefined(raw.healthPort),
        host: raw.healthHost,
        timeout: raw.healthTimeout,
        maxSlotLagBytes: raw.healthMaxSlotLag
      }
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
    /**
     * The liveness and readiness checks (served on `settings.health.port` when set). Their
     * gauges (`Health.checkGauge`) are sampled every metrics interval once health is asked for:
     * from the start with the health port, else from the first use of this service.
     */
    readonly health: Health.Health["Service"]
    /** The port the health server listens on (the one picked for port 0), when it runs. */
    readonly healthPort: number | undefined
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
 * (unknown-partition "sync", consumer lag, where a new group starts reading), and so is
 * `LifecycleRegistry` (the PostgreSQL storage provides it): each lifecycle-driving group is
 * registered there at start, and a group of another process already holding a topic is refused.
 * On the log engine the runtime also needs `LogWriter` and `LogSource`, looked up when it starts
 * (`PgOutbox.layerConfig` provides them when `OUTBOX_ENGINE=log`; missing, the layer fails with
 * `OutboxEngine.LogEngineUnavailableError`).
 *
 * @since 0.1.0
 * @category models
 */
export type Ports = OutboxStore | InboxStore | Transactor | WakeUp | Publisher | BrokerProbe | ConsumerSource

/**
 * Samples the store once into the gauges.
 *
 * @since 0.1.0
 * @category metrics
 */
export const sampleMetrics: Effect.Effect<void, StoreError, OutboxStore> = Sampling.sampleStore

/**
 * The runtime layer for the consumer declarations `C`: the services each declaration needs, less
 * the ones the layer provides itself, plus the {@link Ports}.
 *
 * @since 0.1.0
 * @category layers
 */
export type RuntimeLayer<C extends ReadonlyArray<ConsumerDeclaration<unknown>>> = Layer.Layer<
  Outbox.Outbox | Inbox.Inbox | OutboxRuntime,
  | Config.ConfigError
  | OutboxValidationError
  | LifecycleGroupConflictError
  | StoreError
  | BrokerUnreachableError
  | BrokerSecurityError
  | MissingTopicsError
  | BrokerAdminError
  | OutboxEngine.LogEngineUnavailableError
  | Health.HealthServerError,
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
        onExpired: options.onExpired ?? fromConfig.onExpired,
        runConsumers: options.runConsumers ?? fromConfig.runConsumers,
        consumerRestart: options.consumerRestart ?? fromConfig.consumerRestart,
        metricsInterval: options.metricsInterval ?? fromConfig.metricsInterval,
        brokerStartupTimeout: options.brokerStartupTimeout ?? fromConfig.brokerStartupTimeout,
        autoCreateTopics: options.autoCreateTopics ?? fromConfig.autoCreateTopics,
        health: options.health ?? fromConfig.health
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
