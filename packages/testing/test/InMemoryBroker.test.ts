import { assert, describe, it } from "@effect/vitest"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import { Effect, Fiber, Option, Result, Stream } from "effect"
import * as TestClock from "effect/testing/TestClock"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

const request = (n: number, partition: number | null, key: string | null = null): PublishRequest => ({
  id: `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId,
  topic: "t",
  key,
  partition,
  headers: { "event-id": `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` },
  payload: new Uint8Array([n])
})

const layer = InMemoryBroker.layer({ topics: { t: 3 } })

/** Two records for partition 0 and two for partition 1, interleaved. */
const twoPartitions = [request(1, 0), request(2, 1), request(3, 1), request(4, 0)]

describe("InMemoryBroker", () => {
  it.effect("routes keyed records where a real producer puts them (kafkajs's murmur2, the Java client's)", () =>
    Effect.gen(function* () {
      // Where kafkajs's default partitioner puts each key among 7 partitions (computed with
      // kafkajs 2.2.4; adapter-kafka's tests hold core's partitioner to kafkajs's on random keys).
      const kafkajs = [
        ["", 2],
        ["a", 5],
        ["ab", 0],
        ["abc", 4],
        ["user-42", 1],
        ["ünïcödé-key", 1],
        ["0123456789abcdef", 6],
        ["😀-key", 5]
      ] as const
      const publisher = yield* Publisher
      const outcomes = yield* publisher.publish(kafkajs.map(([key], n) => request(n, null, key)))
      for (const [n, outcome] of outcomes.entries()) {
        assert.strictEqual(Result.getOrThrow(outcome).partition, kafkajs[n]![1], kafkajs[n]![0])
      }
    }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 7 } })))
  )

  it.effect(
    "a retriable fault fails the whole partition batch and appends nothing of it (one request per partition)",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const publisher = yield* Publisher
        yield* broker.failPublish({ fault: "retriable", partition: 1 })
        const outcomes = yield* publisher.publish(twoPartitions)
        assert.deepStrictEqual(outcomes.map(Result.isSuccess), [true, false, false, true])
        assert.strictEqual((yield* broker.log("t", 1)).length, 0)
        assert.strictEqual((yield* broker.log("t", 0)).length, 2)
      }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 3 }, combinePartitions: false })))
  )

  it.effect("a call's partitions in one request (the default): each written once, receipts per partition", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      const outcomes = yield* publisher.publish(twoPartitions)
      assert.deepStrictEqual(
        outcomes.map((o) => (Result.isSuccess(o) ? `${o.success.partition}@${o.success.offset}` : "failed")),
        ["0@0", "1@0", "1@1", "0@1"]
      )
      assert.strictEqual((yield* broker.log("t", 0)).length, 2)
      assert.strictEqual((yield* broker.log("t", 1)).length, 2)
    }).pipe(Effect.provide(layer))
  )

  it.effect(
    "a partition's fault fails the combined request: sent again per partition, the other partition is written twice",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const publisher = yield* Publisher
        yield* broker.failPublish({ fault: "retriable", partition: 1 })
        const outcomes = yield* publisher.publish(twoPartitions)
        assert.deepStrictEqual(
          outcomes.map((o) => (Result.isSuccess(o) ? `${o.success.partition}@${o.success.offset}` : o.failure._tag)),
          ["0@2", "RetriablePublishError", "RetriablePublishError", "0@3"]
        )
        assert.strictEqual((yield* broker.log("t", 1)).length, 0)
        assert.deepStrictEqual(
          (yield* broker.log("t", 0)).map((r) => r.headers["event-id"]),
          [request(1, 0).id, request(4, 0).id, request(1, 0).id, request(4, 0).id]
        )
      }).pipe(Effect.provide(layer))
  )

  it.effect("a lost answer to a combined request: every partition written once, every record reported failed", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      yield* broker.failPublish({ fault: "lost_ack", partition: 2 })
      const outcomes = yield* publisher.publish([request(1, 0), request(2, 2)])
      assert.deepStrictEqual(
        outcomes.map((o) => (Result.isSuccess(o) ? "ok" : o.failure._tag)),
        ["RetriablePublishError", "RetriablePublishError"]
      )
      assert.strictEqual((yield* broker.log("t", 0)).length, 1)
      assert.strictEqual((yield* broker.log("t", 2)).length, 1)
    }).pipe(Effect.provide(layer))
  )

  it.effect("a lost acknowledgement appends the records yet reports a retriable error", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      const probe = yield* BrokerProbe
      yield* broker.failPublish({ fault: "lost_ack", skip: 1 })
      const first = yield* publisher.publish([request(1, 2)])
      const second = yield* publisher.publish([request(2, 2)])
      assert.isTrue(Result.isSuccess(first[0]!))
      const failure = second[0]!
      assert.isTrue(Result.isFailure(failure) && failure.failure._tag === "RetriablePublishError")
      assert.strictEqual((yield* broker.log("t", 2)).length, 2)
      const found = yield* probe.find({ topic: "t", partition: 2, eventId: request(2, 2).id, since: 0 })
      assert.deepStrictEqual(found, Option.some({ topic: "t", partition: 2, offset: "1" }))
    }).pipe(Effect.provide(layer))
  )

  it.effect("records without key or partition are spread round-robin", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      yield* publisher.publish([request(1, null), request(2, null), request(3, null)])
      for (const p of [0, 1, 2]) assert.strictEqual((yield* broker.log("t", p)).length, 1)
    }).pipe(Effect.provide(layer))
  )

  it.effect("two members of one group split the partitions; a leaving member's partitions move", () =>
    Effect.gen(function* () {
      const source = yield* ConsumerSource
      const publisher = yield* Publisher
      yield* publisher.publish([request(1, 0), request(2, 1), request(3, 2)])
      const a = yield* source.subscribe({ groupId: "g", topics: ["t"], fromBeginning: true })
      yield* Effect.scoped(
        Effect.gen(function* () {
          const b = yield* source.subscribe({ groupId: "g", topics: ["t"], fromBeginning: true })
          const fromA = yield* a.batches.pipe(Stream.take(2), Stream.runCollect)
          const fromB = yield* b.batches.pipe(Stream.take(1), Stream.runCollect)
          assert.deepStrictEqual(fromA.map((batch) => batch.partition).sort(), [0, 2])
          assert.deepStrictEqual(
            fromB.map((batch) => batch.partition),
            [1]
          )
        })
      )
      // b left without committing: partition 1 moves to a, from the group's (absent) commit.
      const moved = yield* a.batches.pipe(Stream.take(1), Stream.runCollect)
      assert.deepStrictEqual(
        moved.map((batch) => [batch.partition, batch.records[0]!.offset]),
        [[1, "0"]]
      )
    }).pipe(Effect.provide(layer))
  )

  it.effect("injected probe, admin and commit faults surface as typed errors", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const probe = yield* BrokerProbe
      const source = yield* ConsumerSource
      yield* broker.failNext({ operation: "probe", count: 1 })
      yield* broker.failNext({ operation: "commit", count: 1 })
      const probeError = yield* Effect.flip(
        probe.find({ topic: "t", partition: 0, eventId: request(1, 0).id, since: 0 })
      )
      assert.strictEqual(probeError._tag, "ProbeError")
      const subscription = yield* source.subscribe({ groupId: "g", topics: ["t"] })
      const commitError = yield* Effect.flip(subscription.commit([{ topic: "t", partition: 0, offset: "1" }]))
      assert.isTrue(commitError.retriable)
      yield* subscription.commit([{ topic: "t", partition: 0, offset: "1" }])
      assert.deepStrictEqual(yield* broker.committed("g"), [{ topic: "t", partition: 0, offset: "1" }])
      assert.strictEqual(yield* broker.faultsFired, 2)
    }).pipe(Effect.provide(layer))
  )
})

describe("InMemoryBroker poll faults", () => {
  it.effect("a poll fault fails the stream; a new subscription of the group redelivers", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      const source = yield* ConsumerSource
      yield* publisher.publish([request(1, 0)])
      yield* broker.failNext({ operation: "poll", count: 1 })
      const failed = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* source.subscribe({ groupId: "g", topics: ["t"], fromBeginning: true })
          return yield* Effect.flip(Stream.runCollect(subscription.batches))
        })
      )
      assert.strictEqual(failed.operation, "poll")
      assert.isTrue(failed.retriable)
      const batches = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* source.subscribe({ groupId: "g", topics: ["t"], fromBeginning: true })
          return yield* subscription.batches.pipe(Stream.take(1), Stream.runCollect)
        })
      )
      assert.deepStrictEqual(
        batches.map((b) => b.records.map((r) => r.offset)),
        [["0"]]
      )
    }).pipe(Effect.provide(layer))
  )
})

describe("InMemoryBroker publish latency", () => {
  it.effect("a publish waits for the configured latency on the TestClock before appending", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const publisher = yield* Publisher
      const fiber = yield* Effect.forkChild(publisher.publish([request(1, 0)]))
      yield* TestClock.adjust("99 millis")
      assert.strictEqual((yield* broker.log("t", 0)).length, 0)
      yield* TestClock.adjust("1 millis")
      const [outcome] = yield* Fiber.join(fiber)
      assert.isTrue(Result.isSuccess(outcome!))
      const [record] = yield* broker.log("t", 0)
      assert.strictEqual(record!.timestamp, 100)
    }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 }, publishLatency: "100 millis" })))
  )
})
