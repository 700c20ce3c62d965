// Registry codecs on the real services: Avro and JSON Schema payloads enqueued in PostgreSQL,
// published by the relay in the Confluent wire format, handled by the consumer runner as the
// topic's Effect Schema type; and read by consumers that are not ours (kafkajs plus avsc, and
// Apache Kafka's Java client plus Apache Avro: scripts/interop), which resolve the schema id in
// each record through the registry's REST API.

import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type * as Consumer from "@effect-outbox/core/Consumer"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Topic from "@effect-outbox/core/Topic"
import * as MemoryRegistry from "@effect-outbox/schema-registry/MemoryRegistry"
import * as RegistryCodec from "@effect-outbox/schema-registry/RegistryCodec"
import * as SchemaRegistry from "@effect-outbox/schema-registry/SchemaRegistry"
import * as RealServices from "@effect-outbox/testing/RealServices"
import avsc from "avsc"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const OrderPlaced = Schema.Struct({
  orderId: Schema.String,
  amountCents: Schema.Int,
  note: Schema.optionalKey(Schema.String),
  channel: Schema.Literals(["web", "shop"])
}).annotate({ identifier: "com.acme.OrderPlaced" })

const orders = [
  { orderId: "o-1", amountCents: 1250, channel: "web" as const },
  { orderId: "o-2", amountCents: 99, note: "gift", channel: "shop" as const }
]

/** A plain kafkajs consumer: the raw record values of a topic, as a client in another stack sees them. */
const rawValues = (brokers: ReadonlyArray<string>, topic: string, count: number) =>
  Effect.promise(async () => {
    const kafka = new Kafkajs.Kafka({ brokers: [...brokers], logLevel: Kafkajs.logLevel.NOTHING })
    const consumer = kafka.consumer({ groupId: `foreign-${randomUUID()}` })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    const values: Array<Buffer> = []
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => {
          values.push(message.value as Buffer)
          if (values.length === count) resolve()
        }
      })
    })
    await consumer.disconnect()
    return values
  })

const dropKafka = (brokers: ReadonlyArray<string>, topics: Array<string>) =>
  Effect.promise(async () => {
    const admin = new Kafkajs.Kafka({ brokers: [...brokers], logLevel: Kafkajs.logLevel.NOTHING }).admin()
    await admin.connect()
    await admin
      .deleteTopics({ topics })
      .catch(() => undefined)
      .finally(() => admin.disconnect())
  })

const interop = fileURLToPath(new URL("../../../scripts/interop/", import.meta.url))
const run = promisify(execFile)

/** Apache Kafka's Java client and Apache Avro (scripts/interop/AvroInterop.java): "<id> <name> <record>" per record. */
const javaConsumer = (brokers: ReadonlyArray<string>, topic: string, registryUrl: string, count: number) =>
  Effect.promise(async () => {
    const classpath = join(mkdtempSync(join(tmpdir(), "interop-")), "classpath")
    await run("mvn", [
      "-q",
      "-f",
      join(interop, "pom.xml"),
      "dependency:build-classpath",
      `-Dmdep.outputFile=${classpath}`
    ])
    const { stdout } = await run(
      "java",
      [
        "-cp",
        readFileSync(classpath, "utf8").trim(),
        join(interop, "AvroInterop.java"),
        brokers.join(","),
        topic,
        registryUrl,
        String(count)
      ],
      { timeout: 120_000 }
    )
    return stdout
      .trim()
      .split("\n")
      .map((line) => {
        const [id, name, ...record] = line.split(" ")
        return { id: Number(id), name, record: JSON.parse(record.join(" ")) as Record<string, unknown> }
      })
  })

const formats = [["avro", RegistryCodec.avro] as const, ["json-schema", RegistryCodec.jsonSchema] as const]

describe("registry codecs on PostgreSQL and Kafka", () => {
  for (const [format, codec] of formats) {
    it.live(
      `${format}: enqueue -> relay -> consumer runner round trip; a foreign client decodes the records via the registry`,
      () =>
        Effect.gen(function* () {
          const services = yield* RealServices.RealServices
          const runId = randomUUID().replaceAll("-", "").slice(0, 10)
          const schema = `codec_${runId}`
          const Orders = Topic.make({
            name: `codec-${runId}.orders`,
            schema: OrderPlaced,
            key: (o) => o.orderId,
            codec: codec(OrderPlaced)
          })
          const handled = yield* Queue.unbounded<Consumer.Message<typeof OrderPlaced.Type>>()
          const registryUrl = yield* MemoryRegistry.serve()
          const registry = SchemaRegistry.layerHttp({ url: registryUrl })
          const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "codec-test" })
          const sql = PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 3 })
          const storage = PgOutbox.layer({ schema }).pipe(Layer.provideMerge(sql))
          const runtime = OutboxRuntime.layer({
            relay: { instances: 1, pollInterval: Duration.millis(100) },
            consumers: [
              OutboxRuntime.consumer(
                Topic.consumer(Orders, {
                  groupId: `codec-${runId}`,
                  handler: (message) => Queue.offer(handled, message)
                })
              )
            ]
          }).pipe(
            Layer.provideMerge(Layer.mergeAll(storage, kafka, registry)),
            // The start-up check: the topic's schema is registered before anything runs.
            Layer.provideMerge(RegistryCodec.layerRegistered([Orders]).pipe(Layer.provideMerge(registry)))
          )
          yield* BrokerAdmin.use((admin) =>
            Effect.andThen(
              admin.ensureTopic({ topic: Orders.name, partitions: 1 }),
              admin.ensureTopic({ topic: Orders.deadLetterTopic, partitions: 1 })
            )
          ).pipe(Effect.provide(kafka))

          yield* Effect.gen(function* () {
            yield* Outbox.withTransaction(Topic.enqueueAll(Orders, orders))
            const first = yield* Queue.take(handled).pipe(Effect.timeout("60 seconds"))
            const second = yield* Queue.take(handled).pipe(Effect.timeout("60 seconds"))
            assert.deepStrictEqual([first.payload, second.payload], orders)

            // Not ours: magic byte, schema id resolved over REST, the body decoded by its own means.
            const values = yield* rawValues(services.kafkaBrokers, Orders.name, 2)
            const decoded = yield* Effect.forEach(values, (value) =>
              Effect.promise(async () => {
                assert.strictEqual(value[0], 0)
                const id = value.readInt32BE(1)
                const answer = (await (await fetch(`${registryUrl}/schemas/ids/${id}`)).json()) as {
                  schema: string
                  schemaType?: string
                }
                const body = value.subarray(5)
                if (format === "avro") {
                  assert.strictEqual(answer.schemaType, undefined)
                  const type = avsc.Type.forSchema(JSON.parse(answer.schema))
                  assert.strictEqual(type.name, "com.acme.OrderPlaced")
                  return { ...type.fromBuffer(body) }
                }
                assert.strictEqual(answer.schemaType, "JSON")
                assert.deepStrictEqual(JSON.parse(answer.schema).required, ["orderId", "amountCents", "channel"])
                return JSON.parse(body.toString("utf8"))
              })
            )
            assert.deepStrictEqual(
              decoded.map((d) => ({ ...d, note: d.note ?? undefined })),
              orders.map((o) => ({ note: undefined, ...o }))
            )
            if (format === "avro") {
              const java = yield* javaConsumer(services.kafkaBrokers, Orders.name, registryUrl, 2)
              const id = values[0]!.readInt32BE(1)
              assert.deepStrictEqual(
                java,
                orders.map((o) => ({ id, name: "com.acme.OrderPlaced", record: { note: null, ...o } }))
              )
            }
          }).pipe(
            Effect.provide(runtime),
            Effect.scoped,
            Effect.ensuring(
              Effect.flatMap(
                Effect.service(SqlClient.SqlClient),
                (client) => client.unsafe(`DROP SCHEMA "${schema}" CASCADE`).unprepared
              ).pipe(Effect.provide(sql), Effect.ignore)
            ),
            Effect.ensuring(dropKafka(services.kafkaBrokers, [Orders.name, Orders.deadLetterTopic]))
          )
        }).pipe(
          Effect.scoped,
          Effect.provide(RealServices.layer),
          Effect.provideService(References.MinimumLogLevel, "Warn")
        ),
      { timeout: 180_000 }
    )
  }
})
