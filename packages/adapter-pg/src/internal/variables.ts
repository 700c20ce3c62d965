/**
 * Every environment variable of the PostgreSQL adapter (docs/configuration.md is generated from
 * this table; `PgOutbox.layerConfig` and `PgTables.layerConfig` read through it).
 */
import * as EnvVariable from "@effect-outbox/core/EnvVariable"

export const variables = EnvVariable.table(
  { package: "adapter-pg", title: "PostgreSQL (claim engine storage)" },
  {
    url: EnvVariable.secret("DATABASE_URL", "the PostgreSQL connection string"),
    maxConnections: EnvVariable.integer("DATABASE_MAX_CONNECTIONS", 10, "pool size"),
    keepAlive: EnvVariable.duration(
      "DATABASE_KEEPALIVE",
      "30 seconds",
      "idle time before TCP keep-alive probes (a dead peer is noticed in about a minute, not 15)"
    ),
    schema: EnvVariable.string(
      "OUTBOX_SCHEMA",
      "outbox",
      "schema of the outbox tables; created (with a warning naming it) when it does not exist"
    ),
    tablePrefix: EnvVariable.string("OUTBOX_TABLE_PREFIX", "outbox_", "prefix of every table name"),
    channel: EnvVariable.optionalString(
      "OUTBOX_CHANNEL",
      "`<schema>_<prefix>wakeup`",
      "the LISTEN/NOTIFY channel relays are woken on"
    ),
    migrate: EnvVariable.boolean("OUTBOX_MIGRATE", true, "apply the outbox migrations at start-up"),
    notify: EnvVariable.boolean(
      "OUTBOX_NOTIFY",
      true,
      "after each enqueueing commit, a coalesced `NOTIFY` wakes relays in other processes"
    ),
    notifyInTransaction: EnvVariable.boolean(
      "OUTBOX_NOTIFY_IN_TRANSACTION",
      false,
      "`NOTIFY` inside the enqueueing transaction instead (serialises commits)"
    ),
    notifyInterval: EnvVariable.duration(
      "OUTBOX_NOTIFY_INTERVAL",
      "50 millis",
      "at most one after-commit `NOTIFY` per this interval per process"
    ),
    listen: EnvVariable.boolean("OUTBOX_LISTEN", true, "relays `LISTEN` for wake-ups (else they only poll)"),
    recordTransitions: EnvVariable.boolean(
      "OUTBOX_RECORD_TRANSITIONS",
      false,
      "append every status change to `<prefix>transition`"
    ),
    logSlot: EnvVariable.optionalString(
      "OUTBOX_LOG_SLOT",
      "`<schema>_<prefix>log`",
      "the log engine's replication slot and publication (1-63 of a-z, 0-9, `_`)"
    ),
    callTimeout: EnvVariable.duration(
      "OUTBOX_DB_CALL_TIMEOUT",
      "30 seconds",
      "claim, transition and stale-lease reads give up after this"
    )
  }
)
