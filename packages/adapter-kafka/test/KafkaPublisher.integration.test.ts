// KafkaPublisher against the real broker: what reaches Kafka, where, and how failures are typed.

import { assert, layer } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import Kafkajs from "kafkajs"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import { freshTopic, KafkaTest, request, text } from "./support.ts"

const receipts = <A, E>(outcomes: ReadonlyArray<Result.Result<A, E>>) =>
  outcomes.map((o) => {
    if (Result.isFailure(o)) throw new Error(`unexpected failure: ${JSON.stringify(o.failure)}`)
    return o.success
  })

layer(KafkaTest, { timeout: "90 seconds", excludeTestServices: true })("KafkaPublisher", (it) => {
  it.effect("returns one receipt per record in request order, offsets contiguous per partition", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(3)
      const publisher = yield* Publisher
      const batch = yield* Effect.forEach([0, 1, 0, 2, 0, 1], (partition, i) =>
        request(topic, { key: `k${i}`, partition })
      )
      const first = receipts(yield* publisher.publish(batch))
      assert.deepStrictEqual(
        first.map((r) => [r.topic, r.partition, r.offset]),
        [
          [topic, 0, "0"],
          [topic, 1, "0"],
          [topic, 0, "1"],
          [topic, 2, "0"],
          [topic, 0, "2"],
          [topic, 1, "1"]
        ]
      )
      const second = receipts(yield* publisher.publish([yield* request(topic, { partition: 0 })]))
      assert.deepStrictEqual(second, [{ topic, partition: 0, offset: "3" }])
    })
  )

  it.effect("the record carries key, partition, payload bytes, event-id, traceparent and the user's headers", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const publisher = yield* Publisher
      const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
      const sent = yield* request(topic, {
        key: "user-7",
        partition: 1,
        payload: "héllo",
        headers: { traceparent, tenant: "acme" }
      })
      const [receipt] = receipts(yield* publisher.publish([sent]))
      const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
      assert.strictEqual(records.length, 1)
      const record = records[0]!
      assert.strictEqual(record.partition, 1)
      assert.strictEqual(record.offset, receipt!.offset)
      assert.strictEqual(record.key, "user-7")
      assert.strictEqual(text(record.value), "héllo")
      assert.deepStrictEqual(record.headers, { "event-id": sent.id, traceparent, tenant: "acme" })
    })
  )

  it.effect("keyed records without a partition land where the Java client would put them, in order", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(4)
      const publisher = yield* Publisher
      const keys = ["alice", "bob", "carol", "dave", "erin"]
      const sent = []
      for (let round = 0; round < 3; round++) {
        const batch = yield* Effect.forEach(keys, (key) => request(topic, { key, payload: `${key}-${round}` }))
        sent.push(...batch)
        receipts(yield* publisher.publish(batch))
      }
      const partitioner = Kafkajs.Partitioners.DefaultPartitioner()
      const meta = [0, 1, 2, 3].map((partitionId) => ({
        partitionId,
        leader: 1,
        replicas: [1],
        isr: [1],
        partitionErrorCode: 0
      }))
      const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
      assert.strictEqual(records.length, sent.length)
      for (const key of keys) {
        const expected = partitioner({ topic, partitionMetadata: meta, message: { key, value: null } })
        const mine = records.filter((r) => r.key === key)
        assert.isTrue(
          mine.every((r) => r.partition === expected),
          `${key} on partition ${expected}`
        )
        const ordered = [...mine].sort((a, b) => Number(BigInt(a.offset) - BigInt(b.offset)))
        assert.deepStrictEqual(
          ordered.map((r) => text(r.value)),
          [0, 1, 2].map((round) => `${key}-${round}`)
        )
      }
    })
  )

  it.effect("a partition the topic does not have fails that record only, with UnknownPartitionError", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const publisher = yield* Publisher
      const outcomes = yield* publisher.publish([
        yield* request(topic, { partition: 0 }),
        yield* request(topic, { partition: 2 }),
        yield* request(topic, { partition: 1 })
      ])
      assert.isTrue(Result.isSuccess(outcomes[0]!))
      assert.isTrue(Result.isSuccess(outcomes[2]!))
      const failed = outcomes[1]!
      assert.isTrue(Result.isFailure(failed))
      if (Result.isFailure(failed)) {
        assert.strictEqual(failed.failure._tag, "UnknownPartitionError")
        assert.deepInclude(failed.failure, { topic, partition: 2, partitionCount: 2 })
      }
    })
  )

  it.effect("a topic that does not exist is a permanent failure, reported at once", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const started = Date.now()
      const [outcome] = yield* publisher.publish([yield* request(`adapter-kafka-missing-${Date.now()}`, {})])
      assert.isTrue(Result.isFailure(outcome!))
      if (Result.isFailure(outcome!)) assert.strictEqual(outcome.failure._tag, "PermanentPublishError")
      assert.isBelow(Date.now() - started, 5_000)
    })
  )

  it.effect("a record larger than the broker accepts is a permanent failure; the producer keeps working", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const publisher = yield* Publisher
      const huge = yield* request(topic, { payload: "x".repeat(2_000_000) })
      const [outcome] = yield* publisher.publish([huge])
      assert.isTrue(Result.isFailure(outcome!))
      if (Result.isFailure(outcome!)) {
        assert.strictEqual(outcome.failure._tag, "PermanentPublishError")
        assert.match(outcome.failure.message, /over the limit of 1048588.*max\.message\.bytes/)
      }
      const [next] = receipts(yield* publisher.publish([yield* request(topic, {})]))
      assert.strictEqual(next!.partition, 0)
    })
  )

  it.effect("a partition added by BrokerAdmin is publishable right away", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const publisher = yield* Publisher
      const admin = yield* BrokerAdmin
      receipts(yield* publisher.publish([yield* request(topic, { partition: 0 })]))
      assert.strictEqual(yield* admin.growPartitions(topic, 3), 3)
      const [receipt] = receipts(yield* publisher.publish([yield* request(topic, { partition: 2 })]))
      assert.deepStrictEqual(receipt, { topic, partition: 2, offset: "0" })
    })
  )

  it.effect("records of several topics go out in one call", () =>
    Effect.gen(function* () {
      const a = yield* freshTopic(1, "a")
      const b = yield* freshTopic(1, "b")
      const publisher = yield* Publisher
      const out = receipts(
        yield* publisher.publish([yield* request(a, {}), yield* request(b, {}), yield* request(a, {})])
      )
      assert.deepStrictEqual(
        out.map((r) => [r.topic, r.offset]),
        [
          [a, "0"],
          [b, "0"],
          [a, "1"]
        ]
      )
    })
  )

  it.effect("an empty batch is a no-op", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* (yield* Publisher).publish([]), [])
    })
  )

  it.effect("a topic deleted after the producer used it does not break publishing to others", () =>
    Effect.gen(function* () {
      const doomed = yield* freshTopic(1, "doomed")
      const other = yield* freshTopic(1, "other")
      const publisher = yield* Publisher
      receipts(yield* publisher.publish([yield* request(doomed, {})]))
      const { admin } = yield* KafkaClient
      yield* KafkaBrokerAdmin.deleteTopics(admin, [doomed])
      const started = Date.now()
      const [receipt] = receipts(yield* publisher.publish([yield* request(other, {})]))
      assert.deepStrictEqual(receipt, { topic: other, partition: 0, offset: "0" })
      assert.isBelow(Date.now() - started, 10_000)
      const [gone] = yield* publisher.publish([yield* request(doomed, {})])
      assert.isTrue(Result.isFailure(gone!))
      if (Result.isFailure(gone!)) assert.strictEqual(gone.failure._tag, "PermanentPublishError")
    })
  )

  it.effect("a partition's records over the topic's max.message.bytes go in several batches, all in order", () =>
    Effect.gen(function* () {
      const topic = yield* topicWithLimit(100_000)
      const publisher = yield* Publisher
      // 30 records of 20 KB on one key: 600 KB for one partition, six times the topic's limit.
      const batch = yield* Effect.forEach(Array.from({ length: 30 }), (_, i) =>
        request(topic, { key: "hot", payload: `${i}:`.padEnd(20_000, "x") })
      )
      const out = receipts(yield* publisher.publish(batch))
      assert.deepStrictEqual(
        out.map((r) => r.offset),
        batch.map((_, i) => String(i))
      )
      const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
      assert.deepStrictEqual(
        records.map((r) => r.headers["event-id"]),
        batch.map((r) => r.id)
      )
    })
  )

  it.effect("a limit lowered after the publisher read it: the broker's size error splits the batch and retries", () =>
    Effect.gen(function* () {
      const topic = yield* topicWithLimit(200_000)
      const publisher = yield* Publisher
      receipts(yield* publisher.publish([yield* request(topic, { key: "k" })]))
      yield* lowerLimit(topic, 50_000)
      // Sized under the cached 200,000: one batch of 120 KB, which the broker now refuses.
      const batch = yield* Effect.forEach(Array.from({ length: 6 }), (_, i) =>
        request(topic, { key: "k", payload: `${i}:`.padEnd(20_000, "y") })
      )
      const out = receipts(yield* publisher.publish(batch))
      assert.deepStrictEqual(
        out.map((r) => r.offset),
        ["1", "2", "3", "4", "5", "6"]
      )
      // One record over the new limit is refused alone; its neighbour on another key lands.
      const [big, small] = yield* publisher.publish([
        yield* request(topic, { key: "big", payload: "z".repeat(60_000) }),
        yield* request(topic, { key: "small" })
      ])
      assert.isTrue(Result.isFailure(big!) && big.failure._tag === "PermanentPublishError")
      assert.deepStrictEqual(receipts([small!]), [{ topic, partition: 0, offset: "7" }])
    })
  )

  it.effect(
    "a combined request one topic refuses (its limit lowered meanwhile): the refused record is permanent, the other lands at least once, later sends land",
    () =>
      Effect.gen(function* () {
        const limited = yield* topicWithLimit(200_000)
        const other = yield* freshTopic(1, "other")
        const publisher = yield* Publisher
        // Both topics' layouts and limits read, as on a running relay.
        receipts(yield* publisher.publish([yield* request(limited, {}), yield* request(other, {})]))
        yield* lowerLimit(limited, 50_000)
        // One request for both partitions (one broker): the broker writes `other`'s record and
        // refuses `limited`'s, so kafkajs fails the whole request.
        const big = yield* request(limited, { payload: "z".repeat(60_000) })
        const small = yield* request(other, {})
        const [refused, landed] = yield* publisher.publish([big, small])
        assert.isTrue(Result.isFailure(refused!) && refused.failure._tag === "PermanentPublishError")
        assert.isTrue(Result.isSuccess(landed!))
        // A later send to the partition whose sequence kafkajs rolled back lands: it is on a fresh
        // producer, so the broker does not take it for a duplicate.
        const later = yield* request(other, {})
        const [laterReceipt] = receipts(yield* publisher.publish([later, yield* request(limited, {})]))
        const records = yield* (yield* TopicReader).read(other).pipe(Stream.runCollect)
        const ids = records.map((r) => r.headers["event-id"])
        assert.isAtLeast(ids.filter((id) => id === small.id).length, 1)
        assert.deepStrictEqual(ids.slice(-1), [later.id])
        assert.strictEqual(laterReceipt!.offset, String(records.length - 1))
      })
  )
})

/** A one-partition topic whose `max.message.bytes` is `bytes`, deleted when the scope closes. */
const topicWithLimit = (bytes: number) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    const topic = `adapter-kafka-limit-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
    yield* Effect.addFinalizer(() => KafkaBrokerAdmin.deleteTopics(admin, [topic]))
    yield* Effect.promise(() =>
      admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: 1, configEntries: [{ name: "max.message.bytes", value: String(bytes) }] }]
      })
    )
    return topic
  })

/** Sets the topic's `max.message.bytes` to `bytes` (after the publisher cached the old one). */
const lowerLimit = (topic: string, bytes: number) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    yield* Effect.promise(() =>
      admin.alterConfigs({
        validateOnly: false,
        resources: [
          {
            type: Kafkajs.ConfigResourceTypes.TOPIC,
            name: topic,
            configEntries: [{ name: "max.message.bytes", value: String(bytes) }]
          }
        ]
      })
    )
  })
