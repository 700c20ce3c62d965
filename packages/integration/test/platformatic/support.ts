// The @platformatic/kafka adapter as the cross-adapter tests use it: one layer tuned for quick
// group joins, and topics deleted when the test's scope closes.
import * as PlatformaticBrokerAdmin from "@effect-outbox/adapter-kafka-platformatic/PlatformaticBrokerAdmin"
import { PlatformaticClient } from "@effect-outbox/adapter-kafka-platformatic/PlatformaticClient"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"

export const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")

export const consumerOptions = {
  sessionTimeoutMillis: 6_000,
  rebalanceTimeoutMillis: 6_000,
  heartbeatIntervalMillis: 500,
  maxWaitTimeMillis: 200
} as const

export const PlatformaticTest = PlatformaticKafkaOutbox.layer(
  { brokers, clientId: "integration-platformatic-test" },
  { consumer: consumerOptions, probe: { timeoutMillis: 20_000 }, publisher: { publishTimeoutMillis: 20_000 } }
)

/** The topic `topic` (created if missing), deleted when the scope closes. */
export const namedTopic = (topic: string, partitions: number) =>
  Effect.gen(function* () {
    const admin = yield* BrokerAdmin
    const client = yield* PlatformaticClient
    yield* Effect.addFinalizer(() => PlatformaticBrokerAdmin.deleteTopics(client.admin, [topic]))
    yield* admin.ensureTopic({ topic, partitions })
    return topic
  })

/** A name no other test (or earlier run against the shared broker) uses. */
export const uniqueName = (prefix: string): string =>
  `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`

/** A keyed publish request with a fresh event id in its `event-id` header. */
export const publishRequest = (topic: string, fields: { readonly key: string }): Effect.Effect<PublishRequest> =>
  Effect.map(makeEventId, (id) => ({
    id,
    topic,
    key: fields.key,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(`payload of ${id}`)
  }))
