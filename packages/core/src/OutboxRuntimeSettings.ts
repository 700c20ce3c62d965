/**
 * What `OutboxRuntime` runs: the consumers it declares and its settings. A module of its own so
 * the runtime's internal start sequence can read them without importing the runtime.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Consumer from "./Consumer.ts"
import type * as Inbox from "./Inbox.ts"
import type * as LogRelay from "./LogRelay.ts"
import type * as Outbox from "./Outbox.ts"
import type * as OutboxEngine from "./OutboxEngine.ts"
import type * as Reconciler from "./Reconciler.ts"
import type * as Relay from "./Relay.ts"
import type * as Retention from "./Retention.ts"
import type * as StaleRecovery from "./StaleRecovery.ts"

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
  /** What the declared consumers that set no `onExpired` do with a record older than the inbox retention. */
  readonly onExpired: Inbox.ExpiredPolicy
  /** `false` declares consumers but does not start them (a publish-only instance). */
  readonly runConsumers: boolean
  /** Delay before a stopped consumer is started again (exponential from this, capped at 1 minute). */
  readonly consumerRestart: Duration.Duration
  /**
   * How often the outbox gauges are sampled from the store, and the running consumers' lag
   * (`Telemetry.consumerLag`) and dead-letter depth (`Telemetry.deadLettersPending`) from the
   * broker when `BrokerAdmin` is provided; `false` samples none.
   */
  readonly metricsInterval: false | Duration.Duration
  /**
   * How long start-up waits for the brokers' first answer before it fails with
   * `BrokerUnreachableError`; `false` skips the start-up check of brokers and topics.
   */
  readonly brokerStartupTimeout: false | Duration.Duration
  /** Create the consumers' missing topics and dead-letter topics at start-up instead of failing. */
  readonly autoCreateTopics: boolean
  /**
   * The health checks (`Health`): `port` serves `/healthz` and `/readyz` there (absent: no
   * server; the checks are still on `OutboxRuntime.health`).
   */
  readonly health: {
    readonly port?: number | undefined
    readonly host: string
    readonly timeout: Duration.Duration
    /** Log engine: the slot lag (bytes) above which the process is not ready (default 1 GiB). */
    readonly maxSlotLagBytes?: number | undefined
  }
}
