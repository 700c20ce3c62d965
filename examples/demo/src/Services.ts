/**
 * Where the demo's database and broker come from. Each is chosen on its own:
 *
 * - `DATABASE_URL` set → that PostgreSQL; unset → PGlite, a real PostgreSQL engine embedded in
 *   this process (see `EmbeddedPostgres`).
 * - `KAFKA_BROKERS` set → that Kafka cluster (kafkajs); unset → the in-memory broker of
 *   `@effect-outbox/testing`.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "effect/sql/SqlClient"
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
 * One sentence per service saying what the demo runs against.
 *
 * @since 0.1.0
 * @category rendering
 */
export const describe = (selection: Selection): ReadonlyArray<string> => [
  selection.databaseUrl === undefined
    ? "database: embedded PostgreSQL (PGlite, in this process; set DATABASE_URL to use a server)"
    : `database: PostgreSQL at ${hostOf(Redacted.value(selection.databaseUrl))} (DATABASE_URL)`,
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
export const database = (selection: Selection, schema: string) => {
  const client: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> =
    selection.databaseUrl === undefined
      ? EmbeddedPostgres.layer
      : PgClient.layer({ url: selection.databaseUrl, maxConnections: 4, applicationName: "effect-outbox-demo" })
  const embedded = selection.databaseUrl === undefined
  return PgOutbox.layer({
    schema,
    store: { recordTransitions: true },
    wakeUp: embedded
      ? { notify: false, listen: false }
      : { notify: true, listen: true, fallbackPollInterval: Duration.seconds(1) }
  }).pipe(Layer.provideMerge(client))
}

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
