// The order service on the real PostgreSQL and Kafka, over real HTTP: an order and its event
// commit together, billing invoices each order exactly once, notifications e-mail each customer
// with the event id as idempotency key, and a payload that does not decode is dead-lettered.

import { randomUUID } from "node:crypto"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Outbox from "@effect-outbox/core/Outbox"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import { RealServices } from "@effect-outbox/testing"
import * as Effect from "effect/Effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"
import * as EmailProvider from "../src/EmailProvider.ts"
import * as Service from "../src/Service.ts"

const post = (body: unknown) =>
  Effect.flatMap(Effect.service(HttpClient.HttpClient), (client) =>
    client.execute(HttpClientRequest.post("/orders").pipe(HttpClientRequest.bodyJsonUnsafe(body)))
  ).pipe(
    Effect.flatMap((response) => Effect.map(response.json, (json) => ({ status: response.status, json: json as any })))
  )

const get = (path: string) =>
  Effect.flatMap(Effect.service(HttpClient.HttpClient), (client) => client.execute(HttpClientRequest.get(path))).pipe(
    Effect.flatMap((response) => Effect.map(response.json, (json) => ({ status: response.status, json: json as any })))
  )

describe("order service on real services", () => {
  it.live(
    "POST /orders commits order + event together; billing invoices once; notifications e-mail once per event id; poison is dead-lettered",
    () =>
      Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const options: Service.Options = {
          databaseUrl: services.databaseUrl,
          brokers: services.kafkaBrokers,
          schema: `orders_${runId}`,
          topic: `order-service.${runId}.orders`,
          groupPrefix: `order-service-${runId}`
        }
        const kafka = KafkaOutbox.layer({ brokers: options.brokers, clientId: "order-service-test" })
        yield* BrokerAdmin.use((admin) =>
          Effect.andThen(
            admin.ensureTopic({ topic: options.topic, partitions: 3 }),
            admin.ensureTopic({ topic: `${options.topic}.DLT`, partitions: 1 })
          )
        ).pipe(Effect.provide(kafka))

        const app = Service.layer(options).pipe(
          // The provider fails the first request: the consumer retries with the same key.
          Layer.provideMerge(EmailProvider.layerFake({ failFirst: 1 })),
          Layer.provideMerge(NodeHttpServer.layerTest)
        )

        yield* Effect.gen(function* () {
          const placed = yield* Effect.forEach(["o-1", "o-2", "o-3"], (orderId, i) =>
            post({ orderId, customerEmail: `customer${i}@example.com`, amountCents: 1000 + i })
          )
          assert.deepStrictEqual(
            placed.map((r) => r.status),
            [201, 201, 201]
          )
          const eventIds = placed.map((r) => r.json.eventId as string)

          const invalid = yield* post({ orderId: "o-4", customerEmail: "not an e-mail", amountCents: 5 })
          assert.strictEqual(invalid.status, 400)
          const duplicate = yield* post({ orderId: "o-1", customerEmail: "someone@example.com", amountCents: 1 })
          assert.strictEqual(duplicate.status, 409)

          // A producer outside the typed topic (an old version) writes a payload no consumer decodes.
          const poison = yield* Outbox.enqueueAutocommit({
            topic: options.topic,
            key: "o-legacy",
            payload: new TextEncoder().encode(JSON.stringify({ orderId: "o-legacy", amount: "12.00" }))
          })

          const store = yield* OutboxStore
          const provider = yield* EmailProvider.EmailProvider
          const reader = yield* TopicReader
          let deadLetters: ReadonlyArray<DeadLetter.DeadLetter> = []
          for (let i = 0; i < 600; i++) {
            const stats = yield* store.stats(Date.now())
            deadLetters = yield* reader.read(`${options.topic}.DLT`).pipe(
              Stream.runCollect,
              Effect.map((records) => records.flatMap((r) => Option.toArray(DeadLetter.parse(r))))
            )
            const sent = yield* provider.sent
            if (
              stats.byStatus.SUCCESS === 3 &&
              stats.byStatus.PUSHED_FAILURE === 1 &&
              sent.length === 3 &&
              deadLetters.length === 2
            )
              break
            yield* Effect.sleep("100 millis")
          }

          // The order, its event, its invoice: exactly one each; the rejected requests left nothing.
          const sql = yield* SqlClient.SqlClient
          const invoices = yield* sql.unsafe<{ order_id: string; n: number }>(
            `SELECT order_id, count(*)::int AS n FROM "${options.schema}".invoices GROUP BY order_id ORDER BY order_id`
          )
          assert.deepStrictEqual(
            invoices.map((r) => [r.order_id, r.n]),
            [
              ["o-1", 1],
              ["o-2", 1],
              ["o-3", 1]
            ]
          )
          const stats = yield* store.stats(Date.now())
          assert.deepStrictEqual(stats.byStatus, { SUCCESS: 3, PUSHED_FAILURE: 1 })
          const order = yield* get("/orders/o-1")
          assert.strictEqual(order.status, 200)
          assert.strictEqual(order.json.invoices, 1)
          assert.strictEqual(order.json.eventId, eventIds[0])
          assert.strictEqual((yield* get("/orders/o-4")).status, 404)

          // One e-mail per order, keyed by its event id; the failed first request was retried with the same key.
          const sent = yield* provider.sent
          assert.sameMembers(
            sent.map((e) => e.idempotencyKey),
            eventIds
          )
          const requests = yield* provider.requests
          assert.strictEqual(requests.length, 4)
          assert.strictEqual(requests.filter((r) => r.idempotencyKey === requests[0]!.idempotencyKey).length, 2)

          // The poison record, dead-lettered by each group that could not decode it.
          assert.sameMembers(
            deadLetters.map((l) => l.consumerGroup),
            [`${options.groupPrefix}-billing`, `${options.groupPrefix}-notifications`]
          )
          assert.isTrue(deadLetters.every((l) => l.eventId === poison && l.errorClass === "PayloadDecodeError"))
        }).pipe(
          Effect.provide(app),
          Effect.scoped,
          // Leave the shared services as we found them, pass or fail.
          Effect.ensuring(
            Effect.flatMap(
              Effect.service(SqlClient.SqlClient),
              (sql) => sql.unsafe(`DROP SCHEMA "${options.schema}" CASCADE`).unprepared
            ).pipe(Effect.provide(Service.ports(options)), Effect.ignore)
          ),
          Effect.ensuring(
            Effect.promise(() =>
              deleteTopics(options.brokers, [options.topic, `${options.topic}.DLT`]).catch(() => undefined)
            )
          )
        )
      }).pipe(Effect.provide(RealServices.layer), Effect.provideService(References.MinimumLogLevel, "Error")),
    { timeout: 180_000 }
  )
})

const deleteTopics = async (brokers: ReadonlyArray<string>, topics: Array<string>) => {
  const admin = new Kafkajs.Kafka({ brokers: [...brokers], logLevel: Kafkajs.logLevel.NOTHING }).admin()
  await admin.connect()
  try {
    await admin.deleteTopics({ topics })
  } finally {
    await admin.disconnect()
  }
}
