/**
 * The conformance suite of the broker-facing ports `Publisher`, `BrokerProbe` and `BrokerAdmin`.
 * Each test builds a fresh layer and creates its own uniquely named topics through
 * `BrokerAdmin.ensureTopic`, so the suite runs against a shared real broker too.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { PublishError } from "@effect-outbox/core/Errors"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { publishRequest, uniqueName } from "./internal/conformance.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = Publisher | BrokerProbe | BrokerAdmin

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Publishing to a topic that does not exist fails with `PermanentPublishError`. */
  readonly missingTopicIsPermanent?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Fresh services for every test; may provide extra services `R` that `deleteTopics` uses. */
  readonly layer: () => Layer.Layer<Services | R, unknown>
  /**
   * Called when a test ends with the topics it created, so a shared broker does not keep them.
   * Failures are ignored. Default: topics are left behind (their names start with `topicPrefix`).
   */
  readonly deleteTopics?: (topics: ReadonlyArray<string>) => Effect.Effect<void, unknown, Services | R>
  /** Prefix of every topic the suite creates (default `"conformance"`). */
  readonly topicPrefix?: string
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 120 000). */
  readonly timeout?: number
  /**
   * The same adapter with a broker it cannot reach (a closed port, an in-memory broker in an
   * outage), for the outage case. Without it the case does not run.
   */
  readonly unreachable?: () => Layer.Layer<Services, unknown>
}

const receiptOf = (outcome: PublishOutcome | undefined): PublishReceipt => {
  assert.isDefined(outcome)
  if (Result.isFailure(outcome)) throw new Error(`expected a receipt, got ${outcome.failure.message}`)
  return outcome.success
}

const errorOf = (outcome: PublishOutcome | undefined): PublishError => {
  assert.isDefined(outcome)
  if (Result.isSuccess(outcome)) throw new Error(`expected an error, got offset ${outcome.success.offset}`)
  return outcome.failure
}

const assertIncreasing = (offsets: ReadonlyArray<string>) => {
  for (let i = 1; i < offsets.length; i++) {
    assert.isTrue(BigInt(offsets[i - 1]!) < BigInt(offsets[i]!), `offsets ${offsets.join(",")} are not increasing`)
  }
}

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { missingTopicIsPermanent: true, ...options.features }
  const timeout = options.timeout ?? 120_000
  const prefix = options.topicPrefix ?? "conformance"
  const deleteTopics = options.deleteTopics
  /** Topics created by the running test, deleted (when the adapter can) as the test ends. */
  let created: Array<string> = []
  const topicName = () => {
    const topic = uniqueName(prefix)
    created.push(topic)
    return topic
  }
  const makeTopic = (partitions: number) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = topicName()
      yield* admin.ensureTopic({ topic, partitions })
      return topic
    })
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services>) =>
    it.live(
      title,
      () => {
        created = []
        const cleanup = Effect.suspend(() =>
          deleteTopics === undefined || created.length === 0 ? Effect.void : Effect.ignore(deleteTopics(created))
        )
        return Effect.provide(Effect.ensuring(body, cleanup), options.layer())
      },
      timeout
    )

  describe(`${name} (Publisher, BrokerProbe, BrokerAdmin conformance)`, () => {
    test(
      "ensureTopic creates a topic once; partitionCount reports it, and None for a missing topic",
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
    )

    test(
      "concurrent ensureTopic calls for one topic all succeed",
      Effect.gen(function* () {
        const admin = yield* BrokerAdmin
        const topic = topicName()
        yield* Effect.forEach([1, 2, 3, 4], () => admin.ensureTopic({ topic, partitions: 2 }), {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(2))
      })
    )

    test(
      "growPartitions grows the topic, never shrinks it, and repeats harmlessly",
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
    )

    test(
      "receipts come back in request order, on the explicit partitions",
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
    )

    test(
      "records of one partition keep request order within a batch and across batches",
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
    )

    test(
      "records with one key and no explicit partition land on one partition, in order",
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
    )

    test(
      "an explicit partition the topic does not have fails with UnknownPartitionError",
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
    )

    if (features.missingTopicIsPermanent) {
      test(
        "publishing to a topic that does not exist fails with PermanentPublishError",
        Effect.gen(function* () {
          const publisher = yield* Publisher
          const topic = topicName()
          const [outcome] = yield* publisher.publish([yield* publishRequest(topic, { key: "k" })])
          const error = errorOf(outcome)
          assert.strictEqual(error._tag, "PermanentPublishError")
          assert.strictEqual(error.topic, topic)
        })
      )
    }

    const unreachable = options.unreachable
    if (unreachable !== undefined) {
      it.live(
        "a broker that cannot be reached fails every record with BrokerUnavailableError (an outage, not the record's fault)",
        () =>
          Effect.gen(function* () {
            const publisher = yield* Publisher
            const topic = uniqueName(prefix)
            const requests = yield* Effect.forEach([0, 1], (partition) => publishRequest(topic, { partition }))
            const outcomes = yield* publisher.publish(requests)
            assert.strictEqual(outcomes.length, 2)
            for (const outcome of outcomes) {
              const error = errorOf(outcome)
              assert.strictEqual(error._tag, "BrokerUnavailableError", error.message)
              assert.strictEqual(error.topic, topic)
            }
          }).pipe(Effect.provide(unreachable())),
        timeout
      )
    }

    test(
      "records whose total exceeds the partition's batch limit all land, in order, with receipts",
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
    )

    test(
      "one record over the limit fails permanently and does not fail its neighbours",
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
    )

    test(
      "an empty batch publishes nothing",
      Effect.gen(function* () {
        const publisher = yield* Publisher
        assert.deepStrictEqual(yield* publisher.publish([]), [])
      })
    )

    test(
      "the probe finds a published record by event id, on its partition or across all",
      Effect.gen(function* () {
        const publisher = yield* Publisher
        const probe = yield* BrokerProbe
        const topic = yield* makeTopic(3)
        const since = Date.now() - 60_000
        const requests = yield* Effect.forEach([0, 1, 2, 1], (partition) => publishRequest(topic, { partition }))
        const receipts = (yield* publisher.publish(requests)).map(receiptOf)
        const target = requests[3]!
        const onPartition = yield* probe.find({ topic, partition: 1, eventId: target.id, since })
        assert.deepStrictEqual(onPartition, Option.some(receipts[3]!))
        const anywhere = yield* probe.find({ topic, partition: null, eventId: target.id, since })
        assert.deepStrictEqual(anywhere, Option.some(receipts[3]!))
      })
    )

    test(
      "findMany returns the receipts of the published ids of a window and leaves out the others",
      Effect.gen(function* () {
        const publisher = yield* Publisher
        const probe = yield* BrokerProbe
        const topic = yield* makeTopic(3)
        const since = Date.now() - 60_000
        const requests = yield* Effect.forEach([0, 1, 2, 1, 0], (partition) => publishRequest(topic, { partition }))
        const receipts = (yield* publisher.publish(requests)).map(receiptOf)
        const never = yield* publishRequest(topic, { partition: 2 })
        assert.isDefined(probe.findMany, "the broker answers a window in one call")
        const found = yield* probe.findMany!({
          topic,
          partition: null,
          eventIds: [requests[1]!.id, never.id, requests[4]!.id],
          since
        })
        assert.deepStrictEqual(
          [...found.entries()].sort(([a], [b]) => a.localeCompare(b)),
          [
            [requests[1]!.id, receipts[1]!],
            [requests[4]!.id, receipts[4]!]
          ].sort(([a], [b]) => String(a).localeCompare(String(b)))
        )
        const none = yield* probe.findMany!({ topic, partition: null, eventIds: [never.id], since })
        assert.strictEqual(none.size, 0)
      })
    )

    test(
      "the probe returns None for an event id that never reached the partition",
      Effect.gen(function* () {
        const publisher = yield* Publisher
        const probe = yield* BrokerProbe
        const topic = yield* makeTopic(2)
        const since = Date.now() - 60_000
        const published = yield* publishRequest(topic, { partition: 0 })
        receiptOf((yield* publisher.publish([published]))[0])
        const never = yield* publishRequest(topic, { partition: 0 })
        assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 0, eventId: never.id, since })))
        assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: null, eventId: never.id, since })))
        // Present on partition 0 does not mean present on partition 1.
        assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 1, eventId: published.id, since })))
        // An empty partition holds nothing.
        const empty = yield* makeTopic(1)
        assert.isTrue(Option.isNone(yield* probe.find({ topic: empty, partition: 0, eventId: never.id, since })))
      })
    )

    test(
      "BrokerAdmin.commitGroupOffsets sets a member-less group's position, read back by groupOffsets",
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
    )
  })
}
