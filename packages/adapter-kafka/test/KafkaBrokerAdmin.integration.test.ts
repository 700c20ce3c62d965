// KafkaBrokerAdmin against the real broker (R3.3, R6.2).

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import { freshTopic, KafkaTest } from "./support.ts"

const cleanup = (topic: string) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    yield* Effect.addFinalizer(() => KafkaBrokerAdmin.deleteTopics(admin, [topic]))
  })

layer(KafkaTest, { timeout: "90 seconds", excludeTestServices: true })("KafkaBrokerAdmin", (it) => {
  it.effect("ensureTopic creates the topic with its partitions and configs; a second call changes nothing", () =>
    Effect.gen(function* () {
      const topic = `adapter-kafka-admin-${randomUUID()}`
      yield* cleanup(topic)
      const admin = yield* BrokerAdmin
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.none())
      yield* admin.ensureTopic({ topic, partitions: 3, configs: { "retention.ms": "3600000" } })
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(3))
      yield* admin.ensureTopic({ topic, partitions: 5 })
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(3))
      const { admin: kafkaAdmin } = yield* KafkaClient
      const described = yield* Effect.promise(() =>
        kafkaAdmin.describeConfigs({
          includeSynonyms: false,
          resources: [{ type: 2, name: topic, configNames: ["retention.ms"] }]
        })
      )
      assert.strictEqual(described.resources[0]!.configEntries[0]!.configValue, "3600000")
    })
  )

  it.effect("concurrent ensureTopic calls all succeed", () =>
    Effect.gen(function* () {
      const topic = `adapter-kafka-admin-${randomUUID()}`
      yield* cleanup(topic)
      const admin = yield* BrokerAdmin
      yield* Effect.all(
        Array.from({ length: 5 }, () => admin.ensureTopic({ topic, partitions: 2 })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(2))
    })
  )

  it.effect("growPartitions grows, never shrinks, and concurrent grows to the same count all succeed", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const admin = yield* BrokerAdmin
      assert.strictEqual(yield* admin.growPartitions(topic, 2), 2)
      assert.strictEqual(yield* admin.growPartitions(topic, 1), 2)
      const counts = yield* Effect.all(
        Array.from({ length: 4 }, () => admin.growPartitions(topic, 4)),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(counts, [4, 4, 4, 4])
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(4))
    })
  )

  it.effect("growing a missing topic is a BrokerAdminError that says so", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip((yield* BrokerAdmin).growPartitions(`adapter-kafka-missing-${randomUUID()}`, 2))
      assert.strictEqual(error._tag, "BrokerAdminError")
      assert.match(error.message, /does not exist/)
    })
  )

  it.effect("an invalid partition count is rejected before reaching the broker", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        (yield* BrokerAdmin).ensureTopic({ topic: `adapter-kafka-${randomUUID()}`, partitions: 0 })
      )
      assert.strictEqual(error._tag, "BrokerAdminError")
    })
  )
})
