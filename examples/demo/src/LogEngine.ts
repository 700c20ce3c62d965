/**
 * The quick start's producer on the log engine (docs/log-relay.md): the same `placeOrder`, with the
 * event inserted into the insert-only event table in the order's transaction, and one relay per
 * replication slot streaming the committed inserts from the WAL to Kafka in commit order. Needs a PostgreSQL with
 * `wal_level = logical` (`scripts/services pg-private up` starts one) and a Kafka cluster.
 *
 * @since 0.1.0
 */
import { PgClient } from "@effect/sql-pg"
import { PlatformaticOutbox } from "@effect-outbox/adapter-kafka-platformatic"
import { PgLogOutbox } from "@effect-outbox/adapter-pg"
import { LogRelay } from "@effect-outbox/core"
import { Layer, Redacted } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** A `wal_level = logical` PostgreSQL. */
  readonly url: string
  readonly brokers: ReadonlyArray<string>
  /** One replication slot per outbox (lower-case letters, digits, `_`); the layer's setup creates it when missing. */
  readonly slot: string
}

/**
 * `Outbox` + `Transactor` + `LogSource` on PostgreSQL, the Kafka ports on @platformatic/kafka (the
 * lower commit → publish tail; `KafkaOutbox.layer` from `@effect-outbox/adapter-kafka` works the
 * same), and the `SqlClient` the domain code uses.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options) =>
  Layer.mergeAll(
    PgLogOutbox.layer({ slot: options.slot }),
    PlatformaticOutbox.layer({ brokers: options.brokers, clientId: "orders-log-relay" })
  ).pipe(Layer.provideMerge(PgClient.layer({ url: Redacted.make(options.url) })))

/**
 * Run it in every relay process: the slot's lease holder publishes, the others wait to take over.
 *
 * @since 0.1.0
 * @category relay
 */
export const relay = LogRelay.run()
