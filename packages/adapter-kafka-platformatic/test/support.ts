// Shared by the integration tests of the @platformatic/kafka adapter: one layer tuned for quick
// group joins, and topics deleted when the test's scope closes.
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"

export const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")

export const consumerOptions = {
  sessionTimeoutMillis: 6_000,
  rebalanceTimeoutMillis: 6_000,
  heartbeatIntervalMillis: 500,
  maxWaitTimeMillis: 200
} as const

export const PlatformaticTest = PlatformaticKafkaOutbox.layer(
  { brokers, clientId: "adapter-platformatic-test" },
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

export const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

/** A name no other test (or earlier run against the shared broker) uses. */
export const uniqueName = (prefix: string): string =>
  `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`

/** A publish request with a fresh event id in its `event-id` header. */
export const publishRequest = (
  topic: string,
  fields: { readonly key?: string | null; readonly partition?: number | null; readonly payload?: Uint8Array } = {}
): Effect.Effect<PublishRequest> =>
  Effect.map(makeEventId, (id) => ({
    id,
    topic,
    key: fields.key ?? null,
    partition: fields.partition ?? null,
    headers: { "event-id": id },
    payload: fields.payload ?? new TextEncoder().encode(`payload of ${id}`)
  }))
