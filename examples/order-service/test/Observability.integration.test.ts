// OpenTelemetry export end to end: the service, on the real PostgreSQL and Kafka, exports its
// spans over OTLP/HTTP to a collector (a fake one, here), or through the OpenTelemetry SDK
// (`Observability.console` with in-memory exporters in place of the console ones); either way
// one order's HTTP request, enqueue, publication and both consumers' handlers arrive as ONE
// trace, and the SDK receives the library's metrics, consumer lag included.

import { randomUUID } from "node:crypto"
import { createServer, type Server } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { RealServices } from "@effect-outbox/testing"
import { AggregationTemporality, InMemoryMetricExporter } from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter } from "@opentelemetry/sdk-trace-base"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"
import * as EmailProvider from "../src/EmailProvider.ts"
import * as Observability from "../src/Observability.ts"
import * as Service from "../src/Service.ts"

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
}

/** A collector that keeps what it receives on /v1/traces and accepts the rest. */
const collector = Effect.acquireRelease(
  Effect.promise(
    () =>
      new Promise<{ server: Server; url: string; spans: Array<OtlpSpan> }>((resolve) => {
        const spans: Array<OtlpSpan> = []
        const server = createServer((request, response) => {
          let body = ""
          request.on("data", (chunk) => (body += chunk))
          request.on("end", () => {
            if (request.url === "/v1/traces") {
              const payload = JSON.parse(body)
              for (const resource of payload.resourceSpans ?? []) {
                for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []))
              }
            }
            response.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address() as { port: number }
          resolve({ server, url: `http://127.0.0.1:${address.port}`, spans })
        })
      })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

/** The SDK's in-memory exporter forgets its spans on shutdown; these are read after it. */
class KeptSpans extends InMemorySpanExporter {
  override shutdown() {
    return Promise.resolve()
  }
}

/**
 * Runs the service with `telemetry` on fresh tables and topics, places one order through HTTP and
 * waits until billing invoiced it and notifications sent its e-mail.
 */
const placeOneOrder = (telemetry: Layer.Layer<never>) =>
  Effect.gen(function* () {
    const services = yield* RealServices.RealServices
    const runId = randomUUID().replaceAll("-", "").slice(0, 10)
    const options: Service.Options = {
      databaseUrl: services.databaseUrl,
      brokers: services.kafkaBrokers,
      schema: `otel_${runId}`,
      topic: `order-service.${runId}.orders`,
      groupPrefix: `otel-${runId}`
    }
    yield* BrokerAdmin.use((admin) =>
      Effect.andThen(
        admin.ensureTopic({ topic: options.topic, partitions: 1 }),
        admin.ensureTopic({ topic: `${options.topic}.DLT`, partitions: 1 })
      )
    ).pipe(Effect.provide(KafkaOutbox.layer({ brokers: options.brokers, clientId: "otel-test" })))

    const app = Service.layer(options).pipe(
      Layer.provideMerge(EmailProvider.layerFake()),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(telemetry)
    )
    const eventId = yield* Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const response = yield* client.execute(
        HttpClientRequest.post("/orders").pipe(
          HttpClientRequest.bodyJsonUnsafe({ orderId: "o-1", customerEmail: "ada@example.com", amountCents: 990 })
        )
      )
      assert.strictEqual(response.status, 201)
      const { eventId } = (yield* response.json) as { eventId: string }
      const provider = yield* EmailProvider.EmailProvider
      const sql = yield* SqlClient.SqlClient
      for (let i = 0; i < 300; i++) {
        const invoices = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM "${options.schema}".invoices`)
        if ((yield* provider.sent).length === 1 && invoices[0]!.n === 1) break
        yield* Effect.sleep("100 millis")
      }
      // Let the runtime sample the gauges (consumer lag included) at least once more.
      yield* Effect.sleep("500 millis")
      return eventId
    }).pipe(
      // Leave the shared services as we found them, pass or fail.
      Effect.ensuring(
        Effect.flatMap(
          Effect.service(SqlClient.SqlClient),
          (sql) => sql.unsafe(`DROP SCHEMA "${options.schema}" CASCADE`).unprepared
        ).pipe(Effect.ignore)
      ),
      Effect.provide(app),
      Effect.scoped,
      Effect.ensuring(
        Effect.promise(async () => {
          const admin = new Kafkajs.Kafka({
            brokers: [...options.brokers],
            logLevel: Kafkajs.logLevel.NOTHING
          }).admin()
          await admin.connect()
          await admin
            .deleteTopics({ topics: [options.topic, `${options.topic}.DLT`] })
            .catch(() => undefined)
            .finally(() => admin.disconnect())
        })
      )
    )
    return { eventId, options }
  })

/** One order, one trace: the request is the root, enqueue -> publish -> both handlers below it. */
const assertOneTrace = (
  spans: ReadonlyArray<{ traceId: string; spanId: string; parentSpanId?: string | undefined; name: string }>
) => {
  const enqueue = spans.find((s) => s.name === "outbox.enqueue")
  assert.isDefined(enqueue, `collected: ${[...new Set(spans.map((s) => s.name))].join(", ")}`)
  const trace = spans.filter((s) => s.traceId === enqueue!.traceId)
  const names = trace.map((s) => s.name)
  assert.include(names, "outbox.publish")
  assert.strictEqual(names.filter((n) => n === "outbox.consumer.handler").length, 2, names.join(", "))
  // The root of the trace is the HTTP request that placed the order.
  const root = trace.find((s) => s.parentSpanId === undefined || s.parentSpanId === "")
  assert.isDefined(root)
  assert.match(root!.name, /POST|orders|http/i)
  const publish = trace.find((s) => s.name === "outbox.publish")!
  assert.strictEqual(publish.parentSpanId, enqueue!.spanId)
}

describe("order service telemetry", () => {
  it.live(
    "OTLP: one order is one trace: HTTP request -> enqueue -> publish -> billing and notifications handlers",
    () =>
      Effect.gen(function* () {
        const otel = yield* collector
        const { eventId } = yield* placeOneOrder(
          Observability.otlp({ baseUrl: otel.url, serviceName: "order-service", exportInterval: "200 millis" })
        )
        // The exporter flushed on shutdown; give the collector's request handlers a moment.
        yield* Effect.sleep("300 millis")
        assertOneTrace(otel.spans)
        assert.isString(eventId)
      }).pipe(
        Effect.scoped,
        Effect.provide(RealServices.layer),
        Effect.provideService(References.MinimumLogLevel, "Error")
      ),
    { timeout: 180_000 }
  )

  it.live(
    "OpenTelemetry SDK (@effect/opentelemetry): the same one trace, and the metrics with consumer lag per group",
    () =>
      Effect.gen(function* () {
        const spans = new KeptSpans()
        const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
        const { options } = yield* placeOneOrder(
          Observability.console({
            serviceName: "order-service",
            exportInterval: "200 millis",
            spanExporter: spans,
            metricExporter: metrics
          })
        ).pipe(
          // The runtime samples its gauges (and consumer lag) every 200 ms here.
          Effect.provide(
            ConfigProvider.layer(ConfigProvider.fromEnv({ env: { OUTBOX_METRICS_INTERVAL: "200 millis" } }))
          )
        )
        assertOneTrace(
          spans.getFinishedSpans().map((span) => ({
            traceId: span.spanContext().traceId,
            spanId: span.spanContext().spanId,
            parentSpanId: span.parentSpanContext?.spanId,
            name: span.name
          }))
        )
        const exported = metrics
          .getMetrics()
          .flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics))
        const named = (name: string) => exported.filter((metric) => metric.descriptor.name === name)
        assert.isAbove(
          named("outbox_published_total").length,
          0,
          [...new Set(exported.map((m) => m.descriptor.name))].join(", ")
        )
        const lag = named("outbox_consumer_lag").flatMap(
          (metric) => metric.dataPoints as ReadonlyArray<{ attributes: Record<string, unknown>; value: unknown }>
        )
        for (const group of [`${options.groupPrefix}-billing`, `${options.groupPrefix}-notifications`]) {
          const points = lag.filter(
            (point) => point.attributes.group === group && point.attributes.topic === options.topic
          )
          assert.isAbove(points.length, 0, `no outbox_consumer_lag for ${group}`)
          // Both consumers finished the one order: the last reading is 0.
          assert.strictEqual(points.at(-1)!.value, 0)
        }
      }).pipe(
        Effect.scoped,
        Effect.provide(RealServices.layer),
        Effect.provideService(References.MinimumLogLevel, "Error")
      ),
    { timeout: 180_000 }
  )
})
