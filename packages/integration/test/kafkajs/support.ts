// The kafkajs adapter as the cross-adapter tests use it: one layer tuned for quick group joins,
// and fresh topics that are deleted when the test's scope closes.
import { randomUUID } from "node:crypto"
import * as KafkaBrokerAdmin from "@effect-outbox/adapter-kafka/KafkaBrokerAdmin"
import { KafkaClient } from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { type EventId, makeEventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"

export const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")

export const consumerOptions = {
  sessionTimeoutMillis: 6_000,
  rebalanceTimeoutMillis: 6_000,
  heartbeatIntervalMillis: 500,
  maxWaitTimeMillis: 200
} as const

export const KafkaTest = KafkaOutbox.layer(
  { brokers, clientId: "integration-kafkajs-test" },
  { consumer: consumerOptions, probe: { timeoutMillis: 20_000 }, publisher: { publishTimeoutMillis: 20_000 } }
)

/** A new topic with `partitions` partitions, deleted when the scope closes. */
export const freshTopic = (partitions: number, name = "t") =>
  namedTopic(`integration-kafkajs-${name}-${randomUUID()}`, partitions)

/** The topic `topic` (created if missing), deleted when the scope closes. */
export const namedTopic = (topic: string, partitions: number) =>
  Effect.gen(function* () {
    const admin = yield* BrokerAdmin
    const client = yield* KafkaClient
    yield* Effect.addFinalizer(() => KafkaBrokerAdmin.deleteTopics(client.admin, [topic]))
    yield* admin.ensureTopic({ topic, partitions })
    return topic
  })

export const request = (
  topic: string,
  fields: {
    key?: string | null
    partition?: number | null
    payload?: string
    headers?: Record<string, string>
    id?: EventId
  }
) =>
  Effect.gen(function* () {
    const id = fields.id ?? (yield* makeEventId)
    const r: PublishRequest = {
      id,
      topic,
      key: fields.key ?? null,
      partition: fields.partition ?? null,
      headers: { "event-id": id, ...fields.headers },
      payload: new TextEncoder().encode(fields.payload ?? `payload of ${id}`)
    }
    return r
  })

export const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
