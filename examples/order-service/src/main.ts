/**
 * `node examples/order-service/src/main.ts`: the order service on `PORT` (default 3000) against
 * `DATABASE_URL` and `KAFKA_BROKERS` (defaults: the local services), with the fake e-mail
 * provider. Try:
 *
 * ```sh
 * curl -XPOST localhost:3000/orders -d '{"orderId":"o-1","customerEmail":"ada@example.com","amountCents":1200}'
 * curl localhost:3000/orders/o-1
 * ```
 *
 * @since 0.1.0
 */

import { createServer } from "node:http"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as EmailProvider from "./EmailProvider.ts"
import * as Observability from "./Observability.ts"
import * as Service from "./Service.ts"

const options: Service.Options = {
  databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres",
  brokers: (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(","),
  schema: process.env.ORDER_SERVICE_SCHEMA ?? "order_service",
  topic: process.env.ORDER_SERVICE_TOPIC ?? "order-service.orders",
  groupPrefix: "order-service"
}

// Kafka here does not create topics on first use: make sure ours exist before the consumers join.
const topics = Layer.effectDiscard(
  BrokerAdmin.use((admin) =>
    Effect.andThen(
      admin.ensureTopic({ topic: options.topic, partitions: 3 }),
      admin.ensureTopic({ topic: `${options.topic}.DLT`, partitions: 1 })
    )
  )
).pipe(Layer.provide(KafkaOutbox.layer({ brokers: options.brokers, clientId: "order-service-setup" })))

const port = Number(process.env.PORT ?? 3000)

Service.layer(options).pipe(
  Layer.provide(EmailProvider.layerFake()),
  Layer.provide(NodeHttpServer.layer(createServer, { port })),
  Layer.provide(topics),
  // OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 exports traces, metrics and logs over OTLP;
  // OTEL_TRACES_EXPORTER=console prints spans and metrics through the OpenTelemetry SDK.
  Layer.provide(Observability.layer("order-service")),
  Layer.tap(() => Effect.log(`order service listening on http://localhost:${port}`)),
  Layer.launch,
  NodeRuntime.runMain
)
