/**
 * `ConsumerSource` cases: what a subscription delivers, in which order and batches.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { ConsumerBatch } from "@effect-outbox/core/ConsumerSource"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { uniqueName } from "../../conformance.ts"
import { type Case, eventIdOf, publishTo, subscribe } from "./support.ts"

export const deliversInOffsetOrder: Case = {
  name: "delivers every record of a partition in offset order, one partition per batch",
  run: ({ makeTopic, batchesOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(2)
      const { receipts, requests } = yield* publishTo(
        topic,
        Array.from({ length: 12 }, (_, i) => ({ partition: i % 2, key: `key-${i % 3}` }))
      )
      const batches: ReadonlyArray<ConsumerBatch> = yield* Effect.scoped(
        Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => batchesOf(s, 12))
      )
      for (const batch of batches) {
        assert.strictEqual(batch.topic, topic)
        for (const record of batch.records) {
          assert.strictEqual(record.partition, batch.partition)
          assert.strictEqual(record.topic, topic)
        }
      }
      const records = batches.flatMap((batch) => batch.records)
      assert.strictEqual(records.length, 12)
      for (const partition of [0, 1]) {
        const delivered = records.filter((r) => r.partition === partition)
        const expected = receipts.flatMap((receipt, i) => (receipt.partition === partition ? [i] : []))
        assert.deepStrictEqual(
          delivered.map((r) => r.offset),
          expected.map((i) => receipts[i]!.offset)
        )
        assert.deepStrictEqual(
          delivered.map(eventIdOf),
          expected.map((i) => requests[i]!.id)
        )
        assert.deepStrictEqual(
          delivered.map((r) => r.key),
          expected.map((i) => requests[i]!.key)
        )
      }
      for (const record of records) assert.isTrue(Number.isFinite(record.timestamp) && record.timestamp > 0)
    })
}

export const roundTripsBytes: Case = {
  name: "headers, keys and binary values round-trip byte for byte",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const value = Uint8Array.from({ length: 256 }, (_, i) => i)
      const { requests } = yield* publishTo(topic, [
        {
          key: "clé-ü",
          headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", note: "é ✓" },
          payload: value
        },
        { key: null, payload: new Uint8Array([]) }
      ])
      const records = yield* Effect.scoped(
        Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => recordsOf(s, 2))
      )
      assert.strictEqual(records[0]!.key, "clé-ü")
      assert.deepStrictEqual([...records[0]!.value], [...value])
      assert.deepStrictEqual(records[0]!.headers, requests[0]!.headers)
      assert.strictEqual(records[1]!.key, null)
      assert.strictEqual(records[1]!.value.length, 0)
      assert.strictEqual(eventIdOf(records[1]!), requests[1]!.id)
    })
}

export const waitsForLaterRecords: Case = {
  name: "the stream waits for records published after subscribing",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const records = yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(uniqueName("group"), [topic])
          const fiber = yield* Effect.forkChild(recordsOf(subscription, 3))
          yield* Effect.sleep("200 millis")
          yield* publishTo(topic, [{ partition: 0 }])
          yield* Effect.sleep("200 millis")
          yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
          return yield* Fiber.join(fiber)
        })
      )
      assert.strictEqual(records.length, 3)
      assert.deepStrictEqual(
        records.map((r) => r.offset),
        [...records.map((r) => r.offset)].sort((a, b) => Number(BigInt(a) - BigInt(b)))
      )
    })
}

export const hundredsInOrder: Case = {
  name: "hundreds of records arrive complete and in order across batches",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const { requests } = yield* publishTo(
        topic,
        Array.from({ length: 300 }, () => ({ partition: 0 }))
      )
      const records = yield* Effect.scoped(
        Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => recordsOf(s, 300))
      )
      assert.deepStrictEqual(
        records.map(eventIdOf),
        requests.map((r) => r.id)
      )
    })
}

export const slowMemberKeepsReceiving: Case = {
  name: "a member that works slowly on each batch keeps receiving records published meanwhile",
  run: ({ makeTopic, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(2)
      const subscription = yield* subscribe(uniqueName("group"), [topic])
      // Records keep arriving while the member is busy: the source must keep fetching between
      // pulls (the @platformatic/kafka adapter once stopped for good here, see docs/kafka.md).
      const producer = yield* Effect.forkChild(
        Effect.forEach(
          Array.from({ length: 10 }, (_, round) => round),
          (round) =>
            Effect.andThen(
              publishTo(
                topic,
                Array.from({ length: 20 }, (_, i) => ({ partition: i % 2, key: `key-${round}-${i}` }))
              ),
              Effect.sleep("100 millis")
            ),
          { discard: true }
        )
      )
      let received = 0
      yield* subscription.batches.pipe(
        Stream.tap((batch) => Effect.sleep("50 millis").pipe(Effect.as(batch))),
        Stream.takeUntil((batch) => {
          received += batch.records.length
          return received >= 200
        }),
        Stream.runDrain,
        Effect.timeout(receiveTimeout)
      )
      yield* Fiber.join(producer)
      assert.isAtLeast(received, 200)
    }).pipe(Effect.scoped)
}

export const severalTopics: Case = {
  name: "a subscription covers several topics",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const a = yield* makeTopic(1)
      const b = yield* makeTopic(1)
      const fromA = yield* publishTo(a, [{ partition: 0 }])
      const fromB = yield* publishTo(b, [{ partition: 0 }])
      const records = yield* Effect.scoped(
        Effect.flatMap(subscribe(uniqueName("group"), [a, b]), (s) => recordsOf(s, 2))
      )
      assert.deepStrictEqual(records.map(eventIdOf).sort(), [fromA.requests[0]!.id, fromB.requests[0]!.id].sort())
    })
}
