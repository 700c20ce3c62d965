/**
 * A service as its own process, for the "the process exits as soon as the runtime stopped" test:
 * `OutboxRuntime` on PostgreSQL and the client named by EXIT_CLIENT (`kafkajs` or
 * `platformatic`), one consumer on EXIT_TOPIC (created with its dead-letter topic at start-up),
 * one event enqueued and handled, then the layer closed. Prints "handled", then "ended" once
 * the program is done; the process must then exit by itself (no `process.exit`).
 *
 *   EXIT_CLIENT=… EXIT_TOPIC=… EXIT_GROUP=… OUTBOX_SCHEMA=… DATABASE_URL=… KAFKA_BROKERS=… node runtime-exit-process.ts
 */

import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Topic from "@effect-outbox/core/Topic"
import type * as Config from "effect/Config"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

const Orders = Topic.make({
  name: process.env.EXIT_TOPIC!,
  schema: Schema.Struct({ orderId: Schema.String }),
  key: (order) => order.orderId
})
const kafka: Layer.Layer<
  Publisher | BrokerProbe | BrokerAdmin | ConsumerSource,
  Config.ConfigError | KafkaSecurity.KafkaSecurityError
> = process.env.EXIT_CLIENT === "platformatic" ? PlatformaticKafkaOutbox.layerConfig() : KafkaOutbox.layerConfig()

const program = Effect.gen(function* () {
  const handled = yield* Deferred.make<void>()
  const billing = OutboxRuntime.consumer(
    Topic.consumer(Orders, { groupId: process.env.EXIT_GROUP!, handler: () => Deferred.succeed(handled, undefined) })
  )
  const live = OutboxRuntime.layer({ consumers: [billing], autoCreateTopics: true }).pipe(
    Layer.provide(kafka),
    Layer.provideMerge(PgOutbox.layerConfig)
  )
  yield* Effect.gen(function* () {
    yield* Topic.enqueueAutocommit(Orders, { orderId: "o-1" })
    yield* Deferred.await(handled)
    console.log("handled")
  }).pipe(Effect.provide(live))
})

await Effect.runPromise(program)
console.log("ended")
