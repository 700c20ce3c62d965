// What the publisher asks of kafkajs: an idempotent producer with acks=-1, at most 5 requests in
// flight, and one sendBatch per broker for a call whose partitions each fit one record batch
// (kafkajs sends one request per broker at a time), or, with `combinePartitions: false`, one per
// partition batch. And what happens when no broker answers.

import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import type Kafkajs from "kafkajs"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import * as KafkaBrokerProbe from "../src/KafkaBrokerProbe.ts"
import * as KafkaClientModule from "../src/KafkaClient.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaPublisher from "../src/KafkaPublisher.ts"
import * as KafkaRetry from "../src/KafkaRetry.ts"
import { brokers, freshTopic, request } from "./support.ts"

/** A KafkaClient whose producers report their config and every send call. */
const recordingClient = (calls: {
  configs: Array<Kafkajs.ProducerConfig>
  sends: Array<{ method: string; records: number; acks: number | undefined; partitions: Array<number> }>
}) =>
  Layer.effect(KafkaClient)(
    Effect.gen(function* () {
      const client = yield* KafkaClientModule.make({ brokers, clientId: "adapter-kafka-settings" })
      // The publisher's producers come from the instance with the short cluster retry.
      const kafka = client.publishing!
      const original = kafka.producer.bind(kafka)
      kafka.producer = (config?: Kafkajs.ProducerConfig) => {
        calls.configs.push(config ?? {})
        const producer = original(config)
        const sendBatch = producer.sendBatch.bind(producer)
        const send = producer.send.bind(producer)
        producer.sendBatch = (batch) => {
          calls.sends.push({
            method: "sendBatch",
            records: (batch.topicMessages ?? []).reduce((n, t) => n + t.messages.length, 0),
            acks: batch.acks,
            partitions: [
              ...new Set((batch.topicMessages ?? []).flatMap((t) => t.messages.map((m) => m.partition ?? -1)))
            ]
          })
          return sendBatch(batch)
        }
        producer.send = (record) => {
          calls.sends.push({ method: "send", records: record.messages.length, acks: record.acks, partitions: [] })
          return send(record)
        }
        return producer
      }
      return client
    })
  )

describe("KafkaPublisher producer settings", () => {
  it.live(
    "an idempotent acks=-1 producer; a call's partitions in one sendBatch, or one each with combinePartitions false",
    () => {
      const calls = {
        configs: [] as Array<Kafkajs.ProducerConfig>,
        sends: [] as Array<{ method: string; records: number; acks: number | undefined; partitions: Array<number> }>
      }
      return Effect.gen(function* () {
        const topic = yield* freshTopic(3, "settings")
        const publisher = yield* Publisher
        const batch = yield* Effect.forEach(
          Array.from({ length: 50 }, (_, i) => i),
          (i) => request(topic, { key: `k${i % 7}` })
        )
        const outcomes = yield* publisher.publish(batch)
        assert.isTrue(outcomes.every(Result.isSuccess))
        const used = new Set(outcomes.flatMap((o) => (Result.isSuccess(o) ? [o.success.partition] : [])))
        assert.isAbove(used.size, 1)
        // 50 small records fit one batch per partition, all on the one broker: one call holding
        // every partition, every record sent once.
        assert.strictEqual(calls.sends.length, 1)
        assert.strictEqual(calls.sends[0]!.method, "sendBatch")
        assert.strictEqual(calls.sends[0]!.acks, -1)
        assert.deepStrictEqual(new Set(calls.sends[0]!.partitions), used)
        assert.strictEqual(calls.sends[0]!.records, 50)
        // Without combining: one call per partition.
        calls.sends.length = 0
        const separate = yield* KafkaPublisher.make({ combinePartitions: false })
        assert.isTrue((yield* separate.publish(batch)).every(Result.isSuccess))
        assert.strictEqual(calls.sends.length, used.size)
        for (const send of calls.sends) {
          assert.strictEqual(send.method, "sendBatch")
          assert.strictEqual(send.acks, -1)
          assert.strictEqual(send.partitions.length, 1)
        }
        assert.deepStrictEqual(new Set(calls.sends.map((s) => s.partitions[0])), used)
        assert.strictEqual(
          calls.sends.reduce((n, s) => n + s.records, 0),
          50
        )
        assert.strictEqual(calls.configs.length, 2)
        const config = calls.configs[0]!
        assert.isTrue(config.idempotent)
        assert.isAtMost(config.maxInFlightRequests!, 5)
        assert.isFalse(config.allowAutoTopicCreation)
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Layer.mergeAll(KafkaPublisher.layer(), KafkaBrokerAdmin.layer()).pipe(
            Layer.provideMerge(recordingClient(calls))
          )
        )
      )
    },
    60_000
  )
})

describe("no broker answering", () => {
  const Unreachable = Layer.mergeAll(
    KafkaPublisher.layer({ publishTimeoutMillis: 5_000, retries: 1 }),
    KafkaBrokerProbe.layer({ timeoutMillis: 5_000 }),
    KafkaBrokerAdmin.layer()
  ).pipe(
    Layer.provideMerge(
      KafkaClientModule.layer({
        brokers: ["127.0.0.1:1"],
        clientId: "adapter-kafka-unreachable",
        connectionTimeout: 200,
        kafkaConfig: { retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 } }
      })
    )
  )

  it.live(
    "publishing fails as broker unavailable, the probe and the admin fail typed, all within bounds",
    () =>
      Effect.gen(function* () {
        const started = Date.now()
        const [outcome] = yield* (yield* Publisher).publish([yield* request("anything", { partition: 0 })])
        assert.isTrue(Result.isFailure(outcome!))
        if (Result.isFailure(outcome!)) assert.strictEqual(outcome.failure._tag, "BrokerUnavailableError")
        const probeError = yield* Effect.flip(
          (yield* BrokerProbe).find({ topic: "anything", partition: 0, eventId: yield* makeEventId, since: 0 })
        )
        assert.strictEqual(probeError._tag, "ProbeError")
        const adminError = yield* Effect.flip((yield* BrokerAdmin).partitionCount("anything"))
        assert.strictEqual(adminError._tag, "BrokerAdminError")
        assert.isBelow(Date.now() - started, 20_000)
      }).pipe(
        Effect.provide(Unreachable),
        // The probe and the admin retry within KafkaRetry's bound (30 s by default): set short here.
        Effect.provideService(KafkaRetry.CurrentPolicy, {
          initialDelayMillis: 50,
          maxDelayMillis: 200,
          totalMillis: 2_000
        })
      ),
    60_000
  )
})
