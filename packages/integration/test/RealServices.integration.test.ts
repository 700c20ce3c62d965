// The ground every integration test stands on: the real broker and the real database answer and
// behave as the library assumes.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Config, Effect, Redacted } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")
const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

describe("real Kafka broker", () => {
  it("a keyed record with headers sent to an explicit partition reads back byte-equal", async () => {
    const kafka = new Kafkajs.Kafka({ clientId: "services-check", brokers, logLevel: Kafkajs.logLevel.NOTHING })
    const topic = `services-check-${randomUUID()}`
    const admin = kafka.admin()
    const producer = kafka.producer({ idempotent: true })
    const consumer = kafka.consumer({ groupId: `services-check-${randomUUID()}` })
    await admin.connect()
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true })
      await producer.connect()
      const value = Buffer.from([0, 1, 2, 254, 255, ...Buffer.from("payload é")])
      const [receipt] = await producer.send({
        topic,
        acks: -1,
        messages: [{ key: "user-42", partition: 2, value, headers: { "event-id": "e-1", other: Buffer.from([7]) } }]
      })
      assert.strictEqual(receipt!.partition, 2)

      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      const received = await new Promise<Kafkajs.KafkaMessage & { partition: number }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no record within 30 s")), 30_000)
        void consumer.run({
          eachMessage: async ({ message, partition }) => {
            clearTimeout(timer)
            resolve({ ...message, partition })
          }
        })
      })
      assert.strictEqual(received.partition, 2)
      assert.strictEqual(received.key!.toString(), "user-42")
      assert.isTrue(Buffer.compare(received.value!, value) === 0)
      assert.strictEqual(received.headers!["event-id"]!.toString(), "e-1")
      assert.deepStrictEqual([...(received.headers!["other"] as Buffer)], [7])
    } finally {
      await consumer.disconnect()
      await producer.disconnect()
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined)
      await admin.disconnect()
    }
  })
})

describe("real PostgreSQL", () => {
  it.effect(
    "a failed transaction rolls back its insert",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const table = `services_check_${randomUUID().replaceAll("-", "")}`
        yield* sql`create table ${sql(table)} (id int primary key)`
        const failed = yield* Effect.flip(
          sql.withTransaction(
            sql`insert into ${sql(table)} values (1)`.pipe(Effect.andThen(Effect.fail("boom" as const)))
          )
        )
        assert.strictEqual(failed, "boom")
        const rows = yield* sql<{ n: number }>`select count(*)::int as n from ${sql(table)}`
        assert.strictEqual(rows[0]!.n, 0)
        yield* sql.withTransaction(sql`insert into ${sql(table)} values (2)`)
        const after = yield* sql<{ n: number }>`select count(*)::int as n from ${sql(table)}`
        assert.strictEqual(after[0]!.n, 1)
        yield* sql`drop table ${sql(table)}`
      }).pipe(Effect.provide(PgClient.layerConfig({ url: Config.succeed(Redacted.make(databaseUrl)) })), Effect.scoped),
    { timeout: 30_000 }
  )
})
