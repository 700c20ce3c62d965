/**
 * Where the demo's database and broker come from. Each is chosen on its own:
 *
 * - `DATABASE_URL` set → that PostgreSQL; unset → PGlite, a real PostgreSQL engine embedded in
 *   this process (see `EmbeddedPostgres`).
 * - `KAFKA_BROKERS` set → that Kafka cluster (kafkajs); unset → the in-memory broker of
 *   `@effect-outbox/testing`.
 * - The log engine (`--engine log` or `OUTBOX_ENGINE=log`) reads the WAL through a logical
 *   replication slot: `LOGICAL_DATABASE_URL` (else `DATABASE_URL`) must be a PostgreSQL with
 *   `wal_level = logical`. PGlite is not enough: it can decode the WAL, but it is one session
 *   inside this process with no replication connection, and the log relay holds a connection of
 *   its own for the slot's lease.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgEngine from "@effect-outbox/adapter-pg/PgEngine"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as OutboxEngine from "@effect-outbox/core/OutboxEngine"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as EmbeddedPostgres from "./EmbeddedPostgres.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Selection {
  /** `undefined`: embedded PGlite. */
  readonly databaseUrl: Redacted.Redacted | undefined
  /** `undefined`: the in-memory broker. */
  readonly kafkaBrokers: ReadonlyArray<string> | undefined
  /** The variable the database came from, when not `DATABASE_URL`. */
  readonly databaseVariable?: string | undefined
}

/**
 * Reads `DATABASE_URL` and `KAFKA_BROKERS` (comma separated); an empty value counts as unset.
 *
 * @since 0.1.0
 * @category config
 */
export const selection: Config.Config<Selection> = Config.all({
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  kafkaBrokers: Config.option(Config.String("KAFKA_BROKERS"))
}).pipe(
  Config.map(({ databaseUrl, kafkaBrokers }): Selection => {
    const url = Option.filter(databaseUrl, (value) => Redacted.value(value).trim() !== "")
    const brokers = Option.map(kafkaBrokers, (value) =>
      value
        .split(",")
        .map((b) => b.trim())
        .filter((b) => b !== "")
    )
    return {
      databaseUrl: Option.getOrUndefined(url),
      kafkaBrokers: Option.isSome(brokers) && brokers.value.length > 0 ? brokers.value : undefined
    }
  })
)

/**
 * The engine from the command line (`--engine log`, `--engine=log`) or else `OUTBOX_ENGINE`
 * (default `claim`); a wrong value is a configuration error naming the allowed ones.
 *
 * @since 0.1.0
 * @category config
 */
export const engine = (argv: ReadonlyArray<string>): Effect.Effect<OutboxEngine.Engine, Config.ConfigError> => {
  const read = Effect.gen(function* () {
    return yield* OutboxEngine.config
  })
  const at = argv.findIndex((arg) => arg === "--engine" || arg.startsWith("--engine="))
  if (at === -1) return read
  const value = argv[at]!.startsWith("--engine=") ? argv[at]!.slice("--engine=".length) : (argv[at + 1] ?? "")
  // The flag read as the variable would be: the same parsing and the same error.
  return read.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: { OUTBOX_ENGINE: value } }))))
}

/**
 * For the log engine: the logical server, `LOGICAL_DATABASE_URL` before `DATABASE_URL`.
 *
 * @since 0.1.0
 * @category config
 */
export const logicalSelection = (selection: Selection): Config.Config<Selection> =>
  Config.map(Config.option(Config.Redacted("LOGICAL_DATABASE_URL")), (logical) => {
    const url = Option.filter(logical, (value) => Redacted.value(value).trim() !== "")
    return Option.isSome(url)
      ? { ...selection, databaseUrl: url.value, databaseVariable: "LOGICAL_DATABASE_URL" }
      : selection
  })

const logicalHowTo =
  "Start one with `scripts/services pg-private up` and set LOGICAL_DATABASE_URL to the URL " +
  "`scripts/services pg-private url` prints (or DATABASE_URL to any server with wal_level = logical " +
  "and a REPLICATION role), then run `scripts/dev demo --engine log` again."

/**
 * Why the log engine cannot run on the embedded default, and what to do.
 *
 * @since 0.1.0
 * @category rendering
 */
export const logEngineNeedsServer =
  "the log engine needs a PostgreSQL server with wal_level = logical (it reads the WAL through a " +
  "replication slot); the embedded PGlite runs one session in this process and cannot hold the " +
  `slot's replication connection. ${logicalHowTo}`

/**
 * For the log engine: fails, before anything is created, when the server does not run
 * `wal_level = logical`, saying what to do.
 *
 * @since 0.1.0
 * @category checks
 */
export const requireLogical = (url: Redacted.Redacted) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ wal_level: string }>`SHOW wal_level`
    if (row?.wal_level !== "logical") {
      return yield* Effect.fail(
        new Error(
          `${hostOf(Redacted.value(url))} runs wal_level = ${row?.wal_level ?? "unknown"}; the log engine ` +
            `reads the WAL through a replication slot and needs wal_level = logical. ${logicalHowTo}`
        )
      )
    }
  }).pipe(
    Effect.provide(PgClient.layer({ url, maxConnections: 1, applicationName: "effect-outbox-demo" })),
    Effect.scoped
  )

/**
 * One sentence per service saying what the demo runs against.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describe = (selection: Selection): ReadonlyArray<string> => [
  selection.databaseUrl === undefined
    ? "database: embedded PostgreSQL (PGlite, in this process; set DATABASE_URL to use a server)"
    : `database: PostgreSQL at ${hostOf(Redacted.value(selection.databaseUrl))} (${selection.databaseVariable ?? "DATABASE_URL"})`,
  selection.kafkaBrokers === undefined
    ? "broker:   in-memory broker (@effect-outbox/testing; set KAFKA_BROKERS to use Kafka)"
    : `broker:   Kafka at ${selection.kafkaBrokers.join(",")} (KAFKA_BROKERS)`
]

// Never print credentials: only host, port and database.
const hostOf = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.hostname}${parsed.port === "" ? "" : `:${parsed.port}`}${parsed.pathname}`
  } catch {
    return "(unparsable URL)"
  }
}

/**
 * The broker ports the demo uses.
 *
 * @since 0.1.0
 * @category models
 */
export type Broker = Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader

/**
 * The database and outbox storage services, migrated into `schema`.
 *
 * - Embedded: one connection (PGlite runs one transaction at a time), no `NOTIFY`/`LISTEN` —
 *   relays poll, which costs latency and nothing else.
 * - Server: a small pool, `NOTIFY` on enqueue and `LISTEN` in the relay.
 *
 * @since 0.1.0
 * @category layers
 */
export const database = (
  selection: Selection,
  schema: string,
  engine: OutboxEngine.Engine = "claim"
): Layer.Layer<PgOutbox.Services | PgClient.PgClient | SqlClient.SqlClient, unknown> => {
  const client: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> =
    selection.databaseUrl === undefined
      ? EmbeddedPostgres.layer
      : PgClient.layer({ url: selection.databaseUrl, maxConnections: 4, applicationName: "effect-outbox-demo" })
  const embedded = selection.databaseUrl === undefined
  const stores = PgOutbox.layer({
    schema,
    store: { recordTransitions: true },
    wakeUp: embedded
      ? { notify: false, listen: false }
      : { notify: true, listen: true, fallbackPollInterval: Duration.seconds(1) }
  })
  if (engine === "claim") return stores.pipe(Layer.provideMerge(client))
  // The log engine beside the stores (the inbox and the consumer's bookkeeping stay there); the
  // run's own slot, named as PgOutbox.layerConfig names it.
  const log = { slot: slotOf(schema), schema }
  return PgLogOutbox.layer(log).pipe(Layer.provideMerge(stores), Layer.provideMerge(client))
}

/**
 * The log engine's slot of a run's schema.
 *
 * @since 0.1.0
 * @category layers
 */
export const slotOf = (schema: string): string => PgEngine.defaultSlot(schema)

/**
 * The broker ports.
 *
 * @since 0.1.0
 * @category layers
 */
export const broker = (selection: Selection): Layer.Layer<Broker> =>
  selection.kafkaBrokers === undefined
    ? InMemoryTopicReader.layer.pipe(Layer.provideMerge(InMemoryBroker.layer()))
    : KafkaOutbox.layer({ brokers: selection.kafkaBrokers, clientId: "effect-outbox-demo" })

/**
 * Whether the relay should poll fast because there is no wake-up signal.
 *
 * @since 0.1.0
 * @category models
 */
export const pollInterval = (selection: Selection): Duration.Duration =>
  selection.databaseUrl === undefined ? Duration.millis(250) : Duration.millis(500)
