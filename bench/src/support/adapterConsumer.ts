/**
 * Consuming through the library's Kafka adapters, and the raw clients' own consumers beside
 * them: the core `Consumer` over `KafkaConsumerSource` or `PlatformaticConsumerSource` (one order
 * row per event, `transaction: "per-record"` = `Inbox.processOnce`, `"per-batch"` =
 * `Inbox.processBatch`), a no-op `ConsumerSource` subscription committing each batch (delivery
 * through the adapter alone), and each raw client's no-op group consumer.
 *
 * The group join, which differs between the clients and dominates short runs, is left out: every
 * side is timed from its first delivered batch (whose records are not counted) to its last record,
 * except raw @platformatic/kafka, timed from its group join (see `rawNoop`).
 */
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaConsumerSource from "@effect-outbox/adapter-kafka/KafkaConsumerSource"
import * as PlatformaticClient from "@effect-outbox/adapter-kafka-platformatic/PlatformaticClient"
import * as PlatformaticConsumerSource from "@effect-outbox/adapter-kafka-platformatic/PlatformaticConsumerSource"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Consumer from "@effect-outbox/core/Consumer"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type Kafkajs from "kafkajs"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as PlatformaticRaw from "./platformaticRaw.ts"

const { Effect, SqlClient } = Library

/** A `ConsumerSource` on one client (a fetch waits at most 100 ms, as the raw consumers do). */
export const source = (adapter: Library.KafkaAdapter): Layer.Layer<ConsumerSource> =>
  adapter === "kafkajs"
    ? KafkaConsumerSource.layer({ maxWaitTimeMillis: 100 }).pipe(
        Layer.provide(KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-consumer" }))
      )
    : PlatformaticConsumerSource.layer({ maxWaitTimeMillis: 100 }).pipe(
        Layer.provide(PlatformaticClient.layer({ brokers: Env.brokers, clientId: "bench-consumer" }))
      )

/** A no-op kafkajs group consumer (a fresh group, from the earliest) reading `messages` records. */
const kafkajsNoop = async (k: Kafkajs.Kafka, topic: string, messages: number): Promise<number> => {
  const consumer = k.consumer({ groupId: Env.uniqueName("bench-noop"), maxWaitTimeInMs: 100 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    const clock = new PlatformaticRaw.Clock()
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${clock.count}/${messages} in time`)), 300_000)
      void consumer
        .run({
          eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
            clock.add(batch.messages.length)
            for (const m of batch.messages) resolveOffset(m.offset)
            await heartbeat()
            if (clock.count >= messages) {
              clearTimeout(timer)
              resolve()
            }
          }
        })
        .catch(reject)
    })
    return clock.rate()
  } finally {
    await consumer.disconnect()
  }
}

/**
 * The raw client's no-op group consumer reading `messages` records of `topic`: records/s. The
 * @platformatic/kafka one is timed from its member's group join instead: its stream reads ahead
 * (up to 50 MB) while the first record is handed out, so a first-record clock would leave out most
 * of the fetching (`PlatformaticRaw.noopConsume`).
 */
export const rawNoop = (adapter: Library.KafkaAdapter, k: Kafkajs.Kafka, topic: string, messages: number) =>
  adapter === "kafkajs" ? kafkajsNoop(k, topic, messages) : PlatformaticRaw.noopConsume(topic, messages)

const processed = (stack: Library.Stack, group: string) =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${t.processed} WHERE consumer = $1`,
        [group]
      )
      return rows[0]!.n
    })
  )

const Payload = Schema.Struct({ i: Schema.Number })

/**
 * The core `Consumer` on `stack` reading `messages` records of `topic` (written by `Raw.record`)
 * from the beginning, the handler writing one row into `orders`: messages/s.
 */
export const consumer = async (
  stack: Library.Stack,
  orders: string,
  topic: string,
  messages: number,
  adapter: Library.KafkaAdapter,
  transaction: "per-record" | "per-batch"
): Promise<number> => {
  const group = Env.uniqueName(`bench-consumer-${adapter}`)
  await stack.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`TRUNCATE ${orders}`)))
  const scope = await stack.run(Scope.make())
  await stack.run(
    Consumer.make({
      groupId: group,
      topics: [topic],
      schema: Payload,
      fromBeginning: true,
      transaction,
      handler: (m) =>
        Effect.flatMap(
          Effect.service(SqlClient.SqlClient),
          (sql) =>
            sql`INSERT INTO ${sql(orders)} (id, user_id, amount) VALUES (${m.eventId}, ${Env.keyOf(m.payload.i)}, ${m.payload.i % 997})`
        )
    }).pipe(Effect.provide(source(adapter)), Scope.provide(scope))
  )
  // The clock starts at the first committed batch (the group join left out, as for the others).
  const clock = new PlatformaticRaw.Clock()
  let done = 0
  while (done < messages) {
    const now = await processed(stack, group)
    if (now > done) clock.add(now - done)
    done = now
    await Env.sleep(20)
  }
  const rate = clock.rate()
  await stack.run(Scope.close(scope, Exit.void))
  return rate
}

/** Delivery through the adapter alone: subscribe, commit every batch, nothing else; records/s. */
export const sourceOnly = (adapter: Library.KafkaAdapter, topic: string, messages: number): Promise<number> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const subscriber = yield* ConsumerSource
      const subscription = yield* subscriber.subscribe({ groupId: Env.uniqueName("bench-src"), topics: [topic] })
      const clock = new PlatformaticRaw.Clock()
      yield* subscription.batches.pipe(
        Stream.mapEffect((batch) => {
          clock.add(batch.records.length)
          const last = batch.records[batch.records.length - 1]!
          return subscription.commit([
            { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }
          ])
        }),
        Stream.takeUntil(() => clock.count >= messages),
        Stream.runDrain
      )
      return clock.rate()
    }).pipe(Effect.scoped, Effect.provide(source(adapter)))
  )
