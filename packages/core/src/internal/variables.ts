/**
 * Every environment variable of the core package, one table per section of the reference page
 * (docs/configuration.md is generated from them). The modules build their `config` and their
 * `defaults` from these entries, so a default is written once.
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as EnvVariable from "../EnvVariable.ts"
import { DEFAULT_MAX_MESSAGE_BYTES } from "../RecordSize.ts"

const core = (title: string) => ({ package: "core", title })

export const outbox = EnvVariable.table(core("Outbox (enqueue)"), {
  maxRecordBytes: EnvVariable.make({
    name: "OUTBOX_MAX_RECORD_BYTES",
    type: "integer",
    default: `\`${DEFAULT_MAX_MESSAGE_BYTES}\``,
    description:
      "largest record (key + headers + payload) enqueue accepts: Kafka's default `max.message.bytes`, the limit the publishers split by",
    config: Config.Int("OUTBOX_MAX_RECORD_BYTES").pipe(
      Config.orElse(() => Config.Int("OUTBOX_MAX_PAYLOAD_BYTES")),
      Config.withDefault(DEFAULT_MAX_MESSAGE_BYTES)
    )
  }),
  maxPayloadBytes: EnvVariable.optionalInteger(
    "OUTBOX_MAX_PAYLOAD_BYTES",
    "see `OUTBOX_MAX_RECORD_BYTES`",
    "the older name of `OUTBOX_MAX_RECORD_BYTES`, read when that is unset"
  ),
  maxPartition: EnvVariable.integer(
    "OUTBOX_MAX_PARTITION",
    1023,
    "highest explicit partition a record may name; the relay's `sync` never grows a topic past it"
  ),
  claimCheckBytes: EnvVariable.integer(
    "OUTBOX_CLAIM_CHECK_BYTES",
    262_144,
    "with a claim-check store in the layer, a topic payload larger than this is stored aside and the record carries a reference"
  )
})

export const relay = EnvVariable.table(core("Relay (claim engine)"), {
  enabled: EnvVariable.boolean("OUTBOX_RELAY_ENABLED", true, "run relays in this process"),
  instances: EnvVariable.integer("OUTBOX_RELAY_INSTANCES", 1, "relays in this process"),
  owner: EnvVariable.optionalString("OUTBOX_RELAY_OWNER", "`relay-` + random hex", "the relay's lease owner id"),
  batchSize: EnvVariable.integer("OUTBOX_RELAY_BATCH_SIZE", 100, "rows claimed per batch"),
  maxPerKey: EnvVariable.optionalInteger(
    "OUTBOX_RELAY_MAX_PER_KEY",
    "the batch size",
    "rows of one key per batch (the key's contiguous prefix is cut here)"
  ),
  lease: EnvVariable.duration(
    "OUTBOX_RELAY_LEASE",
    "30 seconds",
    "how long a claim is leased; keep it well above the publish timeout"
  ),
  publishTimeout: EnvVariable.duration(
    "OUTBOX_RELAY_PUBLISH_TIMEOUT",
    "10 seconds",
    "a publish call taking longer is abandoned as a retriable failure"
  ),
  pollInterval: EnvVariable.duration(
    "OUTBOX_RELAY_POLL_INTERVAL",
    "1 second",
    "idle relays look for work this often even without a wake-up"
  ),
  maxAttempts: EnvVariable.integer(
    "OUTBOX_RELAY_MAX_ATTEMPTS",
    10,
    "publish attempts before a retriable failure becomes `FAILURE`"
  ),
  backoffBase: EnvVariable.duration("OUTBOX_RELAY_BACKOFF_BASE", "500 millis", "first retry delay (exponential)"),
  backoffMax: EnvVariable.duration("OUTBOX_RELAY_BACKOFF_MAX", "1 minute", "longest retry delay"),
  outageBackoffBase: EnvVariable.duration(
    "OUTBOX_RELAY_OUTAGE_BACKOFF_BASE",
    "500 millis",
    "first pause after a publish that found the broker unavailable (no attempt counted)"
  ),
  outageBackoffMax: EnvVariable.duration("OUTBOX_RELAY_OUTAGE_BACKOFF_MAX", "10 seconds", "longest such pause"),
  failedHead: EnvVariable.literal(
    "OUTBOX_RELAY_FAILED_HEAD",
    ["block", "skip"],
    "block",
    "`block`: a `FAILURE` row holds back its key's younger rows until an operator requeues or skips it; `skip`: they go on"
  ),
  unknownPartition: EnvVariable.literal(
    "OUTBOX_RELAY_UNKNOWN_PARTITION",
    ["fail", "sync"],
    "fail",
    "a record for a partition the topic does not have: `fail` it, or `sync` (grow the topic, then retry)"
  ),
  shutdownTimeout: EnvVariable.duration(
    "OUTBOX_RELAY_SHUTDOWN_TIMEOUT",
    "10 seconds",
    "graceful shutdown waits this long for the batches in flight before handing them back"
  ),
  pipelineDepth: EnvVariable.integer(
    "OUTBOX_RELAY_PIPELINE_DEPTH",
    2,
    "batches one relay holds at once (1: claim, publish, mark, one batch at a time)"
  )
})

export const stale = EnvVariable.table(core("Stale-dispatch recovery"), {
  enabled: EnvVariable.boolean("OUTBOX_STALE_RECOVERY_ENABLED", true, "run stale-dispatch recovery in this process"),
  batchSize: EnvVariable.integer("OUTBOX_STALE_BATCH_SIZE", 100, "stale rows judged per round"),
  interval: EnvVariable.duration("OUTBOX_STALE_INTERVAL", "15 seconds", "time between rounds"),
  giveUpAfter: EnvVariable.duration(
    "OUTBOX_STALE_GIVE_UP_AFTER",
    "5 minutes",
    "a row whose lease expired longer ago than this and whose probe still fails is requeued (a duplicate is possible)"
  ),
  leaseTtl: EnvVariable.optionalDuration(
    "OUTBOX_STALE_LEASE_TTL",
    "4 × the interval, at least 10 seconds",
    "how long one recoverer holds the outbox's recovery lease"
  )
})

export const reconciler = EnvVariable.table(core("Reconciler"), {
  enabled: EnvVariable.boolean(
    "OUTBOX_RECONCILE_ENABLED",
    true,
    "sweep rows left `UNDER_PROCESSING` when a consumer here drives the lifecycle"
  ),
  minAge: EnvVariable.duration(
    "OUTBOX_RECONCILE_MIN_AGE",
    "1 minute",
    "rows `UNDER_PROCESSING` for less than this are left to their consumer"
  ),
  stuckAfter: EnvVariable.duration(
    "OUTBOX_RECONCILE_STUCK_AFTER",
    "15 minutes",
    "rows `UNDER_PROCESSING` without an inbox record for longer than this are reported stuck"
  ),
  batchSize: EnvVariable.integer("OUTBOX_RECONCILE_BATCH_SIZE", 1000, "rows per batch"),
  maxBatchesPerRound: EnvVariable.integer("OUTBOX_RECONCILE_MAX_BATCHES", 10, "batches per round"),
  interval: EnvVariable.duration("OUTBOX_RECONCILE_INTERVAL", "1 minute", "how often")
})

const finished: ReadonlyArray<string> = ["SUCCESS", "PUSHED_FAILURE", "PUBLISHED"]

export const retention = EnvVariable.table(core("Retention"), {
  enabled: EnvVariable.boolean("OUTBOX_RETENTION_ENABLED", true, "purge finished rows in this process"),
  statuses: EnvVariable.make({
    name: "OUTBOX_RETENTION_STATUSES",
    type: "comma-separated statuses",
    default: `\`${finished.join(",")}\``,
    description: "which finished rows are purged",
    value: finished,
    config: Config.String("OUTBOX_RETENTION_STATUSES").pipe(
      Config.map((text) =>
        text
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s.length > 0)
      ),
      Config.withDefault(finished)
    )
  }),
  olderThan: EnvVariable.duration(
    "OUTBOX_RETENTION_OLDER_THAN",
    "7 days",
    "age (since the last update) of purged rows"
  ),
  batchSize: EnvVariable.integer("OUTBOX_RETENTION_BATCH_SIZE", 1000, "rows deleted per batch"),
  maxBatchesPerRound: EnvVariable.integer("OUTBOX_RETENTION_MAX_BATCHES", 100, "batches per round"),
  interval: EnvVariable.duration("OUTBOX_RETENTION_INTERVAL", "5 minutes", "how often a round runs"),
  catchUpInterval: EnvVariable.duration(
    "OUTBOX_RETENTION_CATCH_UP_INTERVAL",
    "1 second",
    "the pause between rounds while a backlog remains"
  ),
  inbox: EnvVariable.make({
    name: "OUTBOX_INBOX_RETENTION",
    type: "duration \\| `off`",
    default: "`30 days`",
    description:
      "the deduplication window: processed-message (inbox) records are forgotten a whole span (PostgreSQL: a 1-day partition) at a time once older than this; `off` keeps them",
    config: Config.String("OUTBOX_INBOX_RETENTION").pipe(Config.withDefault("30 days"))
  }),
  onExpired: EnvVariable.make({
    name: "OUTBOX_INBOX_ON_EXPIRED",
    type: "`dead-letter` \\| `process`",
    default: "`dead-letter`",
    description:
      "a consumed record older than the inbox retention (the deduplication window): dead-letter it, or process it knowingly as new",
    config: Config.String("OUTBOX_INBOX_ON_EXPIRED").pipe(
      Config.withDefault("dead-letter"),
      Config.flatMap((raw): Config.Config<"dead-letter" | "process"> => {
        const value = raw.trim().toLowerCase()
        return value === "dead-letter" || value === "process"
          ? Config.succeed(value)
          : Config.fail(
              new ConfigProvider.SourceError({
                message: `OUTBOX_INBOX_ON_EXPIRED: "${raw}" is neither "dead-letter" nor "process"`
              })
            )
      })
    )
  })
})

export const runtime = EnvVariable.table(core("Runtime (consumers, metrics)"), {
  consumers: EnvVariable.boolean("OUTBOX_CONSUMERS_ENABLED", true, "start the declared consumers"),
  consumerRestart: EnvVariable.duration(
    "OUTBOX_CONSUMER_RESTART",
    "1 second",
    "first delay before restarting a stopped consumer (exponential, at most 1 minute)"
  ),
  metricsEnabled: EnvVariable.boolean("OUTBOX_METRICS_ENABLED", true, "sample the outbox gauges and consumer lag"),
  metricsInterval: EnvVariable.duration("OUTBOX_METRICS_INTERVAL", "10 seconds", "how often"),
  brokerStartupTimeout: EnvVariable.make({
    name: "OUTBOX_BROKER_STARTUP_TIMEOUT",
    type: "duration or `off`",
    default: "`10 seconds`",
    description:
      "start-up fails with one error when the brokers do not answer within it; `off` skips the check of brokers and topics",
    config: Config.String("OUTBOX_BROKER_STARTUP_TIMEOUT").pipe(
      Config.withDefault("10 seconds"),
      Config.flatMap((raw): Config.Config<false | Duration.Duration> => {
        if (raw.trim().toLowerCase() === "off") return Config.succeed(false)
        const timeout = Duration.fromInput(raw.trim() as Duration.Input)
        return Option.isSome(timeout)
          ? Config.succeed(timeout.value)
          : Config.fail(
              new ConfigProvider.SourceError({
                message: `OUTBOX_BROKER_STARTUP_TIMEOUT: "${raw}" is neither a duration (e.g. "10 seconds") nor "off"`
              })
            )
      })
    )
  }),
  autoCreateTopics: EnvVariable.boolean(
    "OUTBOX_AUTO_CREATE_TOPICS",
    false,
    "create missing consumer topics and dead-letter topics at start-up instead of failing"
  )
})

export const health = EnvVariable.table(core("Health probes"), {
  port: EnvVariable.optionalInteger(
    "OUTBOX_HEALTH_PORT",
    "no health server",
    "serve `/healthz` (liveness) and `/readyz` (readiness) as JSON on this port (0 picks a free one)"
  ),
  host: EnvVariable.string(
    "OUTBOX_HEALTH_HOST",
    "0.0.0.0",
    "the address the health server listens on (the orchestrator probes the pod's address)"
  ),
  timeout: EnvVariable.duration(
    "OUTBOX_HEALTH_TIMEOUT",
    "3 seconds",
    "how long a readiness check waits for the database or the broker before calling it unreachable"
  ),
  maxSlotLagBytes: EnvVariable.integer(
    "OUTBOX_HEALTH_MAX_SLOT_LAG_BYTES",
    1_073_741_824,
    "log engine: the replication slot's lag (WAL bytes not yet published) above which the process is not ready"
  )
})
