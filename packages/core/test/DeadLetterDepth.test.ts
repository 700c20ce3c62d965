// R5.3 in memory: the dead-letter depth counts the records on a dead-letter topic from the first
// one not yet replayed; replaying moves the replay position; the runtime samples it into the
// `outbox_dead_letters_pending` gauge for its consumers' dead-letter topics.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ConsumerRecord } from "../src/ConsumerSource.ts"
import * as DeadLetter from "../src/DeadLetter.ts"
import * as DeadLetterDepth from "../src/DeadLetterDepth.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import { TopicReader } from "../src/TopicReader.ts"
import * as WakeUp from "../src/WakeUp.ts"

const broker = () =>
  Layer.provideMerge(InMemoryTopicReader.layer, InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 2 } }))

const ids = Array.from({ length: 4 }, (_, i) => `0190a0a0-0000-7000-8000-00000000000${i}` as EventId)

// Dead letters as the consumer writes them: keys k0, k1 land on partitions by key.
const deadLetter = (i: number) => {
  const record: ConsumerRecord = {
    topic: "orders",
    partition: 0,
    offset: String(i),
    key: `k${i}`,
    headers: { "event-id": ids[i]! },
    value: new TextEncoder().encode(`{"n":${i}}`),
    timestamp: 0
  }
  return DeadLetter.toPublishRequest(record, "orders.DLT", {
    error: new Error(`poison ${i}`),
    attempts: 1,
    classification: "permanent",
    consumerGroup: "billing"
  })
}

const publishDeadLetters = (n: number) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    for (let i = 0; i < n; i++) yield* publisher.publish([yield* deadLetter(i)])
  })

const pending = Effect.map(DeadLetterDepth.sample("orders.DLT"), (d) => Option.getOrThrow(d).pending)
const gauge = Effect.map(
  Metric.value(Metric.withAttributes(Telemetry.deadLettersPending, { topic: "orders.DLT" })),
  (state) => state.value
)
const replay = (filter?: (letter: DeadLetter.DeadLetter) => boolean) =>
  DeadLetter.replay({ from: "orders.DLT", ...(filter === undefined ? {} : { filter }) })
const byEventId =
  (...wanted: ReadonlyArray<number>) =>
  (letter: DeadLetter.DeadLetter) =>
    wanted.some((i) => letter.eventId === ids[i])

describe("DeadLetterDepth (R5.3)", () => {
  it.effect("counts dead letters not yet replayed; a missing dead-letter topic is None", () =>
    Effect.gen(function* () {
      assert.isTrue(Option.isNone(yield* DeadLetterDepth.sample("nothing.DLT")))
      const empty = Option.getOrThrow(yield* DeadLetterDepth.sample("orders.DLT"))
      assert.deepStrictEqual([empty.pending, empty.total], [0, 0])
      yield* publishDeadLetters(4)
      const depth = Option.getOrThrow(yield* DeadLetterDepth.sample("orders.DLT"))
      assert.deepStrictEqual([depth.pending, depth.total], [4, 4])
      assert.strictEqual(yield* gauge, 4)
      assert.isTrue(depth.partitions.every((p) => p.position === null))
    }).pipe(Effect.provide(broker()))
  )

  it.effect("replaying the oldest dead letters lowers it; replaying all brings it to 0", () =>
    Effect.gen(function* () {
      yield* publishDeadLetters(4)
      // Oldest per partition: replaying every dead letter of one partition empties that partition.
      const all = Option.getOrThrow(yield* DeadLetterDepth.sample("orders.DLT"))
      const first = all.partitions.find((p) => p.end !== "0")!
      assert.strictEqual(yield* pending, 4)
      const result = yield* replay((letter) => letter.record.partition === first.partition)
      assert.strictEqual(result.replayed.length, Number(first.end))
      assert.strictEqual(yield* pending, 4 - Number(first.end))
      yield* replay()
      assert.strictEqual(yield* pending, 0)
      assert.strictEqual(yield* gauge, 0)
      assert.strictEqual(
        Option.getOrThrow(yield* DeadLetterDepth.sample("orders.DLT")).total,
        4,
        "they stay on the DLT"
      )
    }).pipe(Effect.provide(broker()))
  )

  it.effect("a dead letter replayed before an older one is counted until the older one is replayed with it", () =>
    Effect.gen(function* () {
      // One partition, so the order is the DLT's order.
      const publisher = yield* Publisher
      for (let i = 0; i < 3; i++) {
        const request = yield* deadLetter(i)
        yield* publisher.publish([{ ...request, partition: 0 }])
      }
      yield* replay(byEventId(1))
      assert.strictEqual(yield* pending, 3, "the oldest is not replayed yet")
      yield* replay(byEventId(0, 1))
      assert.strictEqual(yield* pending, 1)
      yield* replay(byEventId(2))
      assert.strictEqual(yield* pending, 0)
    }).pipe(Effect.provide(broker()))
  )

  it.effect("moving the position reads the topic only up to the first dead letter not replayed", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      for (let i = 0; i < 4; i++) {
        const request = yield* deadLetter(i)
        yield* publisher.publish([{ ...request, partition: 0 }])
      }
      for (let i = 0; i < 200; i++) {
        const request = yield* deadLetter(3)
        yield* publisher.publish([{ ...request, partition: 0 }])
      }
      const read = { n: 0 }
      const counting = Effect.map(Effect.service(TopicReader), (reader) =>
        TopicReader.of({ read: (topic) => reader.read(topic).pipe(Stream.tap(() => Effect.sync(() => read.n++))) })
      )
      const isDeadLetter = (r: { readonly headers: Readonly<Record<string, string>> }) =>
        r.headers[DeadLetter.headers.originalTopic] !== undefined
      yield* DeadLetterDepth.advance(
        "orders.DLT",
        [
          { partition: 0, offset: "0" },
          { partition: 0, offset: "1" }
        ],
        isDeadLetter
      ).pipe(Effect.provideServiceEffect(TopicReader, counting))
      assert.strictEqual(yield* pending, 202, "past the two handled letters, stopped at the third")
      assert.isAtMost(read.n, 3 + 16, "the read stopped at the first letter still waiting (within one chunk)")
    }).pipe(Effect.provide(broker()))
  )
})

const Order = Schema.Struct({ n: Schema.Int })
const Orders = Topic.make({ name: "orders", schema: Order, key: (o) => String(o.n) })

describe("OutboxRuntime samples the dead-letter depth", () => {
  it.live("of its consumers' dead-letter topics, into outbox_dead_letters_pending", () =>
    Effect.gen(function* () {
      yield* publishDeadLetters(3)
      const runtime = OutboxRuntime.layer({
        relay: false,
        staleRecovery: false,
        retention: false,
        // The dead letters' event ids are of 2024: outside the default inbox window, their replay
        // would be refused as expired (dead-lettered again). The window is not this test's subject.
        inboxRetention: false,
        reconciler: false,
        metricsInterval: Duration.millis(20),
        consumers: [OutboxRuntime.consumer(Topic.consumer(Orders, { groupId: "billing", handler: () => Effect.void }))]
      })
      yield* Effect.gen(function* () {
        const deadline = Date.now() + 10_000
        while (Date.now() < deadline && (yield* gauge) !== 3) yield* Effect.sleep("20 millis")
        assert.strictEqual(yield* gauge, 3)
        yield* replay()
        while (Date.now() < deadline && (yield* gauge) !== 0) yield* Effect.sleep("20 millis")
        assert.strictEqual(yield* gauge, 0)
      }).pipe(Effect.provide(runtime), Effect.scoped)
    }).pipe(Effect.provide(Layer.mergeAll(broker(), InMemoryDatabase.layer, WakeUp.layerMemory)))
  )
})
