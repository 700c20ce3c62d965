/**
 * The mailbox on real services: PostgreSQL (`DATABASE_URL`) and Kafka (`KAFKA_BROKERS`), with
 * sequential partition assignment at `maxPerPartition` users per partition.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as PartitionAssignment from "@effect-outbox/core/PartitionAssignment"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: {
  readonly databaseUrl: string
  readonly brokers: ReadonlyArray<string>
  readonly schema: string
  readonly maxPerPartition: number
}) => {
  const storage = PgOutbox.layer({ schema: options.schema, store: { recordTransitions: true } }).pipe(
    Layer.provideMerge(
      PgClient.layer({ url: Redacted.make(options.databaseUrl), maxConnections: 4, applicationName: "mailbox" })
    )
  )
  const broker = KafkaOutbox.layer({ brokers: options.brokers, clientId: "mailbox" })
  return PartitionAssignment.layer({ maxPerPartition: options.maxPerPartition }).pipe(
    Layer.provideMerge(Layer.merge(storage, broker))
  )
}
