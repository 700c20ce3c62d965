/**
 * `BrokerAdmin` cases: topics, partitions and group offsets.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { publishRequest, uniqueName } from "../../conformance.ts"
import { type Case, receiptOf } from "./support.ts"

export const ensureTopicOnce: Case = {
  name: "ensureTopic creates a topic once; partitionCount reports it, and None for a missing topic",
  run: ({ topicName }) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = topicName()
      assert.isTrue(Option.isNone(yield* admin.partitionCount(topic)))
      yield* admin.ensureTopic({ topic, partitions: 3 })
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(3))
      // An existing topic is left as it is.
      yield* admin.ensureTopic({ topic, partitions: 5 })
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(3))
    })
}

export const concurrentEnsureTopic: Case = {
  name: "concurrent ensureTopic calls for one topic all succeed",
  run: ({ topicName }) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = topicName()
      yield* Effect.forEach([1, 2, 3, 4], () => admin.ensureTopic({ topic, partitions: 2 }), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(2))
    })
}

export const growPartitionsNeverShrinks: Case = {
  name: "growPartitions grows the topic, never shrinks it, and repeats harmlessly",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = yield* makeTopic(1)
      assert.strictEqual(yield* admin.growPartitions(topic, 3), 3)
      assert.strictEqual(yield* admin.growPartitions(topic, 3), 3)
      assert.strictEqual(yield* admin.growPartitions(topic, 2), 3)
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(3))
      const grown = yield* Effect.forEach([4, 4], (n) => admin.growPartitions(topic, n), { concurrency: "unbounded" })
      assert.deepStrictEqual(grown, [4, 4])
    })
}

export const commitGroupOffsetsReadBack: Case = {
  name: "BrokerAdmin.commitGroupOffsets sets a member-less group's position, read back by groupOffsets",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const admin = yield* BrokerAdmin
      const topic = yield* makeTopic(2)
      const requests = yield* Effect.forEach([0, 0, 0, 1], (partition) => publishRequest(topic, { partition }))
      const receipts = (yield* publisher.publish(requests)).map(receiptOf)
      const groupId = uniqueName("replay-position")
      const before = yield* admin.groupOffsets({ groupId, topics: [topic] })
      assert.deepStrictEqual(
        before.map((o) => o.committed),
        [null, null]
      )
      const next = String(BigInt(receipts[1]!.offset) + 1n)
      yield* admin.commitGroupOffsets({ groupId, topic, partitions: [{ partition: 0, offset: next }] })
      const after = yield* admin.groupOffsets({ groupId, topics: [topic] })
      assert.deepStrictEqual(
        after.map((o) => [o.partition, o.committed]),
        [
          [0, next],
          [1, null]
        ]
      )
      yield* admin.commitGroupOffsets({ groupId, topic, partitions: [] })
    })
}

export const retentionRead: Case = {
  name: "retentionMillis reads the topic's retention.ms; None when it keeps records without a time limit",
  requires: "retention",
  run: ({ topicName }) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      assert.isDefined(admin.retentionMillis, "the admin reads topic retention")
      const kept = topicName()
      yield* admin.ensureTopic({ topic: kept, partitions: 1, configs: { "retention.ms": "3600000" } })
      assert.deepStrictEqual(yield* admin.retentionMillis!(kept), Option.some(3_600_000))
      const forever = topicName()
      yield* admin.ensureTopic({ topic: forever, partitions: 1, configs: { "retention.ms": "-1" } })
      assert.isTrue(Option.isNone(yield* admin.retentionMillis!(forever)))
    })
}
