/**
 * `Publisher` cases: receipts, per-partition and per-key order, batch limits, missing topics and partitions.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { publishRequest } from "../../conformance.ts"
import { assertIncreasing, type Case, errorOf, receiptOf } from "./support.ts"

export const receiptsInRequestOrder: Case = {
  name: "receipts come back in request order, on the explicit partitions",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(3)
      const requests = yield* Effect.forEach([2, 0, 1, 2, 0], (partition) => publishRequest(topic, { partition }))
      const outcomes = yield* publisher.publish(requests)
      assert.strictEqual(outcomes.length, requests.length)
      const receipts = outcomes.map(receiptOf)
      assert.deepStrictEqual(
        receipts.map((r) => [r.topic, r.partition]),
        [
          [topic, 2],
          [topic, 0],
          [topic, 1],
          [topic, 2],
          [topic, 0]
        ]
      )
      assertIncreasing([receipts[0]!.offset, receipts[3]!.offset])
      assertIncreasing([receipts[1]!.offset, receipts[4]!.offset])
    })
}

export const partitionKeepsOrder: Case = {
  name: "records of one partition keep request order within a batch and across batches",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(2)
      const first = yield* Effect.forEach(Array.from({ length: 20 }), () => publishRequest(topic, { partition: 1 }))
      const second = yield* Effect.forEach(Array.from({ length: 5 }), () => publishRequest(topic, { partition: 1 }))
      const offsets = [
        ...(yield* publisher.publish(first)).map((o) => receiptOf(o).offset),
        ...(yield* publisher.publish(second)).map((o) => receiptOf(o).offset)
      ]
      assert.strictEqual(offsets.length, 25)
      assertIncreasing(offsets)
    })
}

export const keyLandsOnOnePartition: Case = {
  name: "records with one key and no explicit partition land on one partition, in order",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(4)
      const receipts: Array<PublishReceipt> = []
      for (let i = 0; i < 4; i++) {
        const requests = yield* Effect.forEach([1, 2], () => publishRequest(topic, { key: "user-42" }))
        receipts.push(...(yield* publisher.publish(requests)).map(receiptOf))
      }
      assert.strictEqual(new Set(receipts.map((r) => r.partition)).size, 1)
      assertIncreasing(receipts.map((r) => r.offset))
    })
}

export const unknownPartitionFails: Case = {
  name: "an explicit partition the topic does not have fails with UnknownPartitionError",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(2)
      const [outcome] = yield* publisher.publish([yield* publishRequest(topic, { partition: 5 })])
      const error = errorOf(outcome)
      assert.strictEqual(error._tag, "UnknownPartitionError")
      if (error._tag === "UnknownPartitionError") {
        assert.strictEqual(error.topic, topic)
        assert.strictEqual(error.partition, 5)
      }
    })
}

export const missingTopicIsPermanent: Case = {
  name: "publishing to a topic that does not exist fails with PermanentPublishError",
  requires: "missingTopicIsPermanent",
  run: ({ topicName }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = topicName()
      const [outcome] = yield* publisher.publish([yield* publishRequest(topic, { key: "k" })])
      const error = errorOf(outcome)
      assert.strictEqual(error._tag, "PermanentPublishError")
      assert.strictEqual(error.topic, topic)
    })
}

export const oversizedBatchLands: Case = {
  name: "records whose total exceeds the partition's batch limit all land, in order, with receipts",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(2)
      // 24 records of 100 KB for partition 0 (2.4 MB, over Kafka's default 1 MiB batch
      // limit), interleaved with small records for partition 1.
      const requests = yield* Effect.forEach(Array.from({ length: 30 }), (_, i) =>
        i % 5 === 4
          ? publishRequest(topic, { partition: 1 })
          : publishRequest(topic, { partition: 0, key: "hot", payload: new Uint8Array(100_000).fill(i) })
      )
      const receipts = (yield* publisher.publish(requests)).map(receiptOf)
      assert.deepStrictEqual(
        receipts.map((r) => r.partition),
        requests.map((r) => r.partition)
      )
      assertIncreasing(receipts.filter((r) => r.partition === 0).map((r) => r.offset))
      assertIncreasing(receipts.filter((r) => r.partition === 1).map((r) => r.offset))
      const since = Date.now() - 60_000
      const last = requests.findLast((r) => r.partition === 0)!
      assert.deepStrictEqual(
        yield* (yield* BrokerProbe).find({ topic, partition: 0, eventId: last.id, since }),
        Option.some(receipts[requests.indexOf(last)]!)
      )
    })
}

export const oversizedRecordFailsAlone: Case = {
  name: "one record over the limit fails permanently and does not fail its neighbours",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const topic = yield* makeTopic(2)
      const requests = [
        yield* publishRequest(topic, { partition: 0, key: "a" }),
        yield* publishRequest(topic, { partition: 0, key: "huge", payload: new Uint8Array(1_100_000) }),
        yield* publishRequest(topic, { partition: 0, key: "b" }),
        yield* publishRequest(topic, { partition: 1, key: "c" })
      ]
      const outcomes = yield* publisher.publish(requests)
      const error = errorOf(outcomes[1])
      assert.strictEqual(error._tag, "PermanentPublishError")
      assert.strictEqual(error.topic, topic)
      const receipts = [outcomes[0], outcomes[2], outcomes[3]].map(receiptOf)
      assert.deepStrictEqual(
        receipts.map((r) => r.partition),
        [0, 0, 1]
      )
      assertIncreasing([receipts[0]!.offset, receipts[1]!.offset])
    })
}

export const emptyBatch: Case = {
  name: "an empty batch publishes nothing",
  run: () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      assert.deepStrictEqual(yield* publisher.publish([]), [])
    })
}
