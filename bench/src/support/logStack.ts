/**
 * The log engine's bench stack: PgLogOutbox on its own slot (LOGICAL_DATABASE_URL) and the
 * kafkajs publisher and probe, in one runtime; the slot is dropped on close.
 */
import { PgClient } from "@effect/sql-pg"
import * as KafkaBrokerProbe from "@effect-outbox/adapter-kafka/KafkaBrokerProbe"
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaPublisher from "@effect-outbox/adapter-kafka/KafkaPublisher"
import * as PlatformaticBrokerProbe from "@effect-outbox/adapter-kafka-platformatic/PlatformaticBrokerProbe"
import * as PlatformaticClient from "@effect-outbox/adapter-kafka-platformatic/PlatformaticClient"
import * as PlatformaticPublisher from "@effect-outbox/adapter-kafka-platformatic/PlatformaticPublisher"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import * as Outbox from "@effect-outbox/core/Outbox"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as WorkerPublisher from "./workerPublisher.ts"

export const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"

export type KafkaClientKind = "kafkajs" | "kafkajs-per-partition" | "kafkajs-worker" | "platformatic"

/**
 * The relay's publisher and probe on `kafkaClient`; `tapPublisher` wraps the publisher (a
 * scenario's or an experiment's timing of each publish call).
 */
export const brokerLayer = (
  kafkaClient: KafkaClientKind,
  tapPublisher: (publisher: Publisher["Service"]) => Publisher["Service"] = (publisher) => publisher
): Layer.Layer<Publisher | BrokerProbe> => {
  const tapped = <E, R>(layer: Layer.Layer<Publisher, E, R>) =>
    Layer.effect(Publisher)(Effect.map(Effect.service(Publisher), tapPublisher)).pipe(Layer.provide(layer))
  // `kafkajs-worker`: the kafkajs publisher on a worker thread of its own (workerPublisher.ts).
  const kafkajsPublisher =
    kafkaClient === "kafkajs-worker"
      ? tapped(WorkerPublisher.layer(Env.brokers))
      : tapped(KafkaPublisher.layer({ combinePartitions: kafkaClient === "kafkajs" }))
  return kafkaClient !== "platformatic"
    ? Layer.merge(kafkajsPublisher, KafkaBrokerProbe.layer()).pipe(
        Layer.provide(KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-log" }))
      )
    : Layer.merge(tapped(PlatformaticPublisher.layer()), PlatformaticBrokerProbe.layer()).pipe(
        Layer.provide(PlatformaticClient.layer({ brokers: Env.brokers, clientId: "bench-log" }))
      )
}

/**
 * `synchronousCommit`: the writers' `synchronous_commit` (the private cluster's default is `off`,
 * so a commit reaches the WAL flush, and so a logical decoder, only at the WAL writer's next round,
 * up to `wal_writer_delay` = 200 ms later; `on` flushes at commit, as a durable server does).
 */
export const make = (
  pgConnections = 4,
  transport: PgLogSource.Options["transport"] = "stream",
  synchronousCommit?: "on" | "off",
  /**
   * The Kafka adapter the relay publishes and probes through; `kafkajs-per-partition` is kafkajs
   * with `combinePartitions: false` (one produce request per partition).
   */
  kafkaClient: KafkaClientKind = "kafkajs",
  /**
   * The relay's Kafka side built elsewhere (`brokerLayer`, kept across stacks so its producer stays
   * connected, as a raw baseline's does); default: a fresh one of `kafkaClient` per stack.
   */
  broker: Layer.Layer<Publisher | BrokerProbe> = brokerLayer(kafkaClient)
) => {
  const slot = Env.uniqueName("bench_log").toLowerCase()
  const client = PgClient.layer({
    url: Redacted.make(logicalUrl),
    maxConnections: pgConnections + 2,
    ...(synchronousCommit === undefined ? {} : { startupParameters: { synchronous_commit: synchronousCommit } })
  })
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.BENCH_LOG_LEVEL ?? "Warn") as LogLevel.LogLevel
  )
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(
      PgLogOutbox.layer({ slot, transport, outbox: { maxRecordBytes: 1_000_000 } }),
      broker,
      logLevel
    ).pipe(Layer.provideMerge(client))
  )
  const close = async () => {
    await runtime.runPromise(PgLogSource.dropSlot({ slot })).catch(() => undefined)
    await runtime.dispose()
  }
  return { runtime, slot, close }
}

export type Stack = ReturnType<typeof make>

/** Builds the layer (creates the slot): events enqueued after this are in it. */
export const ready = Effect.void

/** The write path's business table (`<schema>.orders`) in a schema of its own; its name. */
export const createOrders = async (stack: Stack, schema: string): Promise<string> => {
  const table = `${schema}.orders`
  await stack.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE SCHEMA ${schema}`)
      yield* Library.createOrdersTable(table)
    })
  )
  return table
}

/**
 * The server's commit durability as the stack's sessions see it ("fsync = on, full_page_writes = on,
 * synchronous_commit = on", the three settings `scripts/services pg-private durability` switches). A
 * write-path ratio depends on it: a commit that skips the WAL flush makes the plain transaction
 * cheaper than on a production server.
 */
export const durability = (stack: Stack): Promise<string> =>
  stack.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe<{ readonly settings: string }>(
        `SELECT string_agg(name || ' = ' || setting, ', ' ORDER BY name) AS settings FROM pg_settings
          WHERE name IN ('fsync', 'full_page_writes', 'synchronous_commit')`
      )
    ).pipe(Effect.map(([row]) => row?.settings ?? "unknown"))
  )

/** `n` events (1 KB, keys over 1000 aggregates) in one transaction; their ids once committed. */
export const enqueue = (topic: string, from: number, n: number) =>
  Effect.gen(function* () {
    return yield* Outbox.withTransaction(
      Outbox.enqueue(
        Array.from({ length: n }, (_, j) => ({ topic, key: Env.keyOf(from + j), payload: Env.payload(from + j) }))
      )
    )
  })

/** `enqueue`, with the time its commit returned (`Env.commitAtRate`'s load). */
export const enqueueCommitted = (topic: string, from: number, n: number) =>
  Effect.map(enqueue(topic, from, n), (ids): Env.Committed => ({ ids, committedAt: Date.now() }))

export const interrupt = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.asVoid(Fiber.interrupt(fiber))

/**
 * Holds back the xmin horizon: a REPEATABLE READ transaction with a snapshot stays open on its
 * own connection until the returned function is called. Unlike scenario 5's holder it takes no
 * xid: on a cluster shared with other tests, an open xid makes every `CREATE_REPLICATION_SLOT`
 * wait for it (a new slot needs a consistent point), which would stall their tests.
 */
export const holdBackVacuum = async (stack: Stack): Promise<() => Promise<void>> => {
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let started: () => void = () => undefined
  const holding = new Promise<void>((resolve) => {
    started = resolve
  })
  const done = stack.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
          yield* sql`SELECT count(*) FROM pg_class`
          started()
          yield* Effect.promise(() => released)
        })
      )
    })
  )
  await holding
  return async () => {
    release()
    await done
  }
}
