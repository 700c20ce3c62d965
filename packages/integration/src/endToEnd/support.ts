/**
 * What the end-to-end cases share: the Kafka ports an adapter gives, the pipeline they run on
 * (outbox and inbox on PostgreSQL), and the context a case gets.
 *
 * @since 0.1.0
 */
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import type * as SuiteCase from "@effect-outbox/testing/SuiteCase"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"

/** What the scenario needs from a Kafka adapter: the ports of its `*KafkaOutbox.layer`. */
export type KafkaPorts = Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader

/** The pipeline the scenario runs: outbox and inbox on PostgreSQL, the adapter's Kafka ports. */
export const live = <R>(
  schema: string,
  pg: Layer.Layer<SqlClient.SqlClient, unknown>,
  kafka: Layer.Layer<KafkaPorts | R, unknown>
) => {
  const DropSchema = Layer.effectDiscard(
    Effect.addFinalizer(() =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
  )
  return Layer.mergeAll(Outbox.layerWith({ maxPayloadBytes: 1_000_000 }), Inbox.Inbox.layer, DropSchema).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema })),
    Layer.provideMerge(pg),
    Layer.provideMerge(kafka)
  )
}

/**
 * What a case gets: the names it may use, and the adapter's way to create a topic (deleted
 * when the scope closes), bound to this test's services.
 */
export interface Context {
  readonly prefix: string
  readonly schema: string
  /** Handlers per partition under key-ordered concurrency; undefined: one record at a time. */
  readonly keyConcurrency: number | undefined
  readonly namedTopic: (topic: string, partitions: number) => Effect.Effect<unknown, unknown, Scope.Scope>
}

/**
 * One row of the scenario table, on the pipeline's services.
 */
export type Case = SuiteCase.Case<Context, Layer.Success<ReturnType<typeof live<never>>> | Scope.Scope>
