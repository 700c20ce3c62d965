// R8.2 on the real services: the W3C traceparent written at enqueue (PostgreSQL) travels in the
// Kafka record's headers, and the publish span and the consumer's handler span continue the
// enqueueing request's trace.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Topic from "@effect-outbox/core/Topic"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as Tracer from "effect/Tracer"
import Kafkajs from "kafkajs"

const Shipment = Schema.Struct({ orderId: Schema.String })

const parentId = (span: Tracer.Span) => Option.getOrUndefined(Option.map(span.parent, (p) => p.spanId))

describe("trace context on PostgreSQL and Kafka", () => {
  it.live(
    "one trace id spans enqueue -> publish -> consume, carried by the Kafka record's traceparent header",
    () => {
      const spans: Array<Tracer.Span> = []
      const tracer = Tracer.make({
        span(options) {
          const span = Tracer.nativeTracer.span.call(Tracer.nativeTracer, options)
          spans.push(span)
          return span
        }
      })
      return Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const schema = `trace_${runId}`
        const Shipments = Topic.make({ name: `trace-${runId}.shipments`, schema: Shipment, key: (s) => s.orderId })
        const handled = yield* Deferred.make<Tracer.Span>()
        const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "trace-test" })
        const storage = PgOutbox.layer({ schema }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 3 }))
        )
        const runtime = OutboxRuntime.layer({
          relay: { instances: 1, pollInterval: Duration.millis(100) },
          consumers: [
            OutboxRuntime.consumer(
              Topic.consumer(Shipments, {
                groupId: `trace-${runId}`,
                fromBeginning: true,
                handler: () => Effect.flatMap(Effect.currentSpan, (span) => Deferred.succeed(handled, span))
              })
            )
          ]
        }).pipe(Layer.provideMerge(Layer.merge(storage, kafka)))

        yield* BrokerAdmin.use((admin) =>
          Effect.andThen(
            admin.ensureTopic({ topic: Shipments.name, partitions: 1 }),
            admin.ensureTopic({ topic: Shipments.deadLetterTopic, partitions: 1 })
          )
        ).pipe(Effect.provide(kafka))

        yield* Effect.gen(function* () {
          const request = yield* Effect.gen(function* () {
            yield* Outbox.withTransaction(Topic.enqueue(Shipments, { orderId: "o-1" }))
            return yield* Effect.currentSpan
          }).pipe(Effect.withSpan("POST /orders"))
          const handler = yield* Deferred.await(handled).pipe(Effect.timeout("60 seconds"))
          const records = yield* TopicReader.use((reader) => reader.read(Shipments.name).pipe(Stream.runCollect))

          const enqueue = spans.find((s) => s.name === Telemetry.spans.enqueue)!
          const publish = spans.find((s) => s.name === Telemetry.spans.publishEvent)!
          assert.strictEqual(records.length, 1)
          assert.strictEqual(
            records[0]!.headers[Telemetry.TRACEPARENT_HEADER],
            `00-${request.traceId}-${enqueue.spanId}-01`
          )
          assert.deepStrictEqual(
            new Set([enqueue.traceId, publish.traceId, handler.traceId]),
            new Set([request.traceId])
          )
          assert.strictEqual(parentId(publish), enqueue.spanId)
          assert.strictEqual(publish.attributes.get("messaging.kafka.message.offset"), records[0]!.offset)
          assert.strictEqual(parentId(handler), enqueue.spanId)
        }).pipe(
          Effect.provide(runtime),
          Effect.scoped,
          // Leave the shared services as we found them, pass or fail; once the runtime has shut
          // down, so its relay does not poll a schema that is gone.
          Effect.ensuring(
            Effect.flatMap(
              Effect.service(SqlClient.SqlClient),
              (sql) => sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`).unprepared
            ).pipe(
              Effect.provide(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 1 })),
              Effect.ignore
            )
          ),
          Effect.ensuring(
            Effect.promise(async () => {
              const admin = new Kafkajs.Kafka({
                brokers: [...services.kafkaBrokers],
                logLevel: Kafkajs.logLevel.NOTHING
              }).admin()
              await admin.connect()
              await admin
                .deleteTopics({ topics: [Shipments.name, Shipments.deadLetterTopic] })
                .catch(() => undefined)
                .finally(() => admin.disconnect())
            })
          )
        )
      }).pipe(
        Effect.provide(RealServices.layer),
        Effect.provideService(Tracer.Tracer, tracer),
        Effect.provideService(References.MinimumLogLevel, "Warn")
      )
    },
    { timeout: 180_000 }
  )
})
