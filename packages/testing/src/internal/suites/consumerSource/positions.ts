/**
 * `ConsumerSource` cases: where a new group starts, grown topics, paused partitions.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { type ConsumerRecord, ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { uniqueName } from "../../conformance.ts"
import { type Case, eventIdOf, publishTo, subscribe } from "./support.ts"

export const defaultReadsFromEarliest: Case = {
  name: "by default a new group joining a topic with history reads it from the earliest record",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const { requests } = yield* publishTo(topic, [{}, {}, {}])
      const records = yield* Effect.scoped(
        Effect.gen(function* () {
          // no fromBeginning: the port's default
          const subscription = yield* (yield* ConsumerSource).subscribe({
            groupId: uniqueName("group"),
            topics: [topic]
          })
          return yield* recordsOf(subscription, 3)
        })
      )
      assert.deepStrictEqual(
        records.map(eventIdOf),
        requests.map((r) => r.id)
      )
    })
}

export const resetLatestSkipsBacklog: Case = {
  name: "reset policy latest: a new group that starts at the end skips what was there and receives what comes after",
  run: ({ makeTopic, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const { requests: before } = yield* publishTo(topic, [{}, {}])
      const old = new Set(before.map((r) => r.id as string))
      const received = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(uniqueName("group"), [topic], false)
          const got: Array<ConsumerRecord> = []
          const reader = yield* Effect.forkChild(
            subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => got.push(...batch.records))))
          )
          // Joining takes a while on a real broker and the end is read at assignment: publish
          // until a record arrives, then check what did.
          yield* Effect.gen(function* () {
            while (got.length === 0) {
              yield* publishTo(topic, [{}])
              yield* Effect.sleep("500 millis")
            }
          }).pipe(Effect.timeout(receiveTimeout))
          yield* Fiber.interrupt(reader)
          return got
        })
      )
      assert.isAbove(received.length, 0)
      assert.deepStrictEqual(
        received.filter((r) => old.has(eventIdOf(r)!)),
        [],
        "records published before the group joined were delivered"
      )
    })
}

export const grownPartitionFromFirstRecord: Case = {
  name: "reset policy earliest: a partition added to the topic is read from its first record once the group sees it",
  requires: "partitionGrowth",
  run: ({ makeTopic, publishToPartition, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      yield* publishTo(topic, [{ partition: 0 }])
      const received = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(uniqueName("group"), [topic], true)
          const got: Array<ConsumerRecord> = []
          const reader = yield* Effect.forkChild(
            subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => got.push(...batch.records))))
          )
          yield* Effect.gen(function* () {
            while (got.length === 0) yield* Effect.sleep("100 millis")
          }).pipe(Effect.timeout(receiveTimeout))
          // The topic grows while the member runs; records land on the new partition before the
          // group's metadata says it exists (a real consumer notices it at its next refresh).
          yield* (yield* BrokerAdmin).growPartitions(topic, 2)
          const added = yield* publishToPartition(topic, 1, 3)
          yield* Effect.gen(function* () {
            while (got.filter((r) => r.partition === 1).length < added.length) yield* Effect.sleep("200 millis")
          }).pipe(Effect.timeout(receiveTimeout))
          yield* Fiber.interrupt(reader)
          return { got, added }
        })
      )
      const onNew = received.got.filter((r) => r.partition === 1)
      assert.deepStrictEqual(
        onNew.map(eventIdOf),
        received.added.map((r) => r.id),
        "every record of the new partition, in order, from its first"
      )
    })
}

export const pausedPartitionWaits: Case = {
  name: "a paused partition is not delivered until it is resumed; the others keep flowing",
  run: ({ makeTopic, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(2)
      yield* publishTo(
        topic,
        Array.from({ length: 8 }, (_, i) => ({ partition: i % 2 }))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(uniqueName("group"), [topic])
          yield* subscription.pause([{ topic, partition: 0 }])
          const before = yield* subscription.batches.pipe(
            Stream.takeUntil((batch) => {
              assert.notStrictEqual(batch.partition, 0, "a paused partition was delivered")
              return batch.records.at(-1)!.offset === "3"
            }),
            Stream.runCollect,
            Effect.timeout(receiveTimeout)
          )
          assert.deepStrictEqual(
            before.flatMap((b) => b.records.map((r) => r.offset)),
            ["0", "1", "2", "3"]
          )
          yield* subscription.resume([{ topic, partition: 0 }])
          const after = yield* subscription.batches.pipe(
            Stream.filter((batch) => batch.partition === 0),
            Stream.takeUntil((batch) => batch.records.at(-1)!.offset === "3"),
            Stream.runCollect,
            Effect.timeout(receiveTimeout)
          )
          assert.deepStrictEqual(
            after.flatMap((b) => b.records.map((r) => r.offset)),
            ["0", "1", "2", "3"]
          )
        })
      )
    })
}
