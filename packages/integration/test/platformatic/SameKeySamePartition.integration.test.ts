// Swapping the adapter must not move keys: a key's records land on the partition kafkajs (and the
// Java client) would choose, so per-key order survives the switch.
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { brokers, namedTopic, publishRequest, uniqueName } from "./support.ts"

const partitionsOf = (topic: string, keys: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const requests = yield* Effect.forEach(keys, (key) => publishRequest(topic, { key }))
    return (yield* publisher.publish(requests)).map((outcome) => {
      if (Result.isFailure(outcome)) throw new Error(outcome.failure.message)
      return outcome.success.partition
    })
  })

describe("the same key lands on the same partition through either adapter", () => {
  it.live(
    "200 keys over 7 partitions",
    () =>
      Effect.gen(function* () {
        const topic = uniqueName("adapter-platformatic-keys")
        const keys = Array.from({ length: 200 }, (_, i) => `user-${i}`)
        yield* namedTopic(topic, 7)
        const platformatic = yield* partitionsOf(topic, keys)
        const kafkajs = yield* partitionsOf(topic, keys).pipe(
          Effect.provide(KafkaOutbox.layer({ brokers, clientId: "keys-kafkajs" }))
        )
        assert.deepStrictEqual(platformatic, kafkajs)
        assert.isAbove(new Set(platformatic).size, 5, "the keys spread over the partitions")
      }).pipe(Effect.scoped, Effect.provide(PlatformaticKafkaOutbox.layer({ brokers, clientId: "keys-platformatic" }))),
    60_000
  )
})
