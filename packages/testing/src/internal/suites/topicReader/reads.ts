/**
 * `TopicReader` cases: a read returns every retained record as it was when the read started,
 * then ends; it commits nothing; a missing topic is a non-retriable read error.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { publishRequest } from "../../conformance.ts"
import { assertOffsetOrder, at, type Case, decoder, publishAll, readAll } from "./support.ts"

export const readsEverything: Case = {
  name: "a read returns every record of every partition, each in offset order, as published, then ends",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.makeTopic(3)
      const requests = yield* Effect.forEach([0, 1, 2, 0, 1, 0, 2], (partition, i) =>
        publishRequest(topic, { partition, key: i % 2 === 0 ? `k${i}` : null, headers: { n: String(i) } })
      )
      const receipts = [...(yield* publishAll(requests.slice(0, 4))), ...(yield* publishAll(requests.slice(4)))]
      const records = yield* readAll(topic)
      assert.strictEqual(records.length, requests.length)
      assertOffsetOrder(records)
      const byPlace = new Map(records.map((r) => [at(r), r]))
      requests.forEach((request, i) => {
        const record = byPlace.get(at(receipts[i]!))
        assert.isDefined(record, `no record at ${at(receipts[i]!)}`)
        assert.strictEqual(record!.topic, topic)
        assert.strictEqual(record!.key, request.key)
        assert.strictEqual(record!.headers["event-id"], request.id)
        assert.strictEqual(record!.headers.n, String(i))
        assert.strictEqual(decoder.decode(record!.value), decoder.decode(request.payload))
      })
    })
}

export const emptyTopic: Case = {
  name: "a topic with no records is an empty stream",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.makeTopic(2)
      assert.deepStrictEqual(yield* readAll(topic), [])
    })
}

export const missingTopic: Case = {
  name: "a topic that does not exist fails the read with a non-retriable ConsumerSourceError",
  run: (topics) =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(readAll(topics.topicName()))
      assert.strictEqual(error._tag, "ConsumerSourceError")
      assert.strictEqual(error.operation, "read")
      assert.isFalse(error.retriable)
    })
}

export const replayTerminates: Case = {
  name: "records published while the read runs are not part of it: replaying into the same topic terminates",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.makeTopic(2)
      const requests = yield* Effect.forEach([0, 1, 0, 1, 0], (partition) => publishRequest(topic, { partition }))
      yield* publishAll(requests)
      const reader = yield* TopicReader
      // Every record read is published again to its own partition, as a dead-letter replay does.
      const replayed = yield* reader.read(topic).pipe(
        Stream.mapEffect((record) =>
          Effect.as(
            Effect.flatMap(publishRequest(topic, { partition: record.partition }), (again) => publishAll([again])),
            record
          )
        ),
        Stream.runCollect,
        Effect.timeout("60 seconds")
      )
      assert.strictEqual(replayed.length, requests.length)
      assert.strictEqual((yield* readAll(topic)).length, 2 * requests.length, "the replayed copies landed")
    })
}

export const commitsNothing: Case = {
  name: "a read commits nothing: a second read returns the same records",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.makeTopic(2)
      yield* publishAll(yield* Effect.forEach([0, 1, 1], (partition) => publishRequest(topic, { partition })))
      const first = (yield* readAll(topic)).map(at).sort()
      const second = (yield* readAll(topic)).map(at).sort()
      assert.strictEqual(first.length, 3)
      assert.deepStrictEqual(second, first)
    })
}

export const readsBeyondOneFetch: Case = {
  name: "a topic larger than one fetch is read whole, in order",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.makeTopic(2)
      // 2 × 150 records of 10 KB: 1.5 MB a partition, more than one 1 MiB fetch or batch.
      for (let round = 0; round < 3; round++) {
        const requests = yield* Effect.forEach(Array.from({ length: 100 }), (_, i) =>
          publishRequest(topic, { partition: i % 2, payload: new Uint8Array(10_000).fill(i) })
        )
        yield* publishAll(requests)
      }
      const records = yield* readAll(topic)
      assert.strictEqual(records.length, 300)
      assert.strictEqual(records.filter((r) => r.partition === 0).length, 150)
      assertOffsetOrder(records)
      assert.isTrue(records.every((r) => r.value.byteLength === 10_000))
    })
}

export const readsByPosition: Case = {
  name: "readAt returns the records at the wanted offsets of one partition, in offset order, and nothing else",
  run: (topics) =>
    Effect.gen(function* () {
      const reader = yield* TopicReader
      assert.isDefined(reader.readAt, "the reader reads by position")
      const topic = yield* topics.makeTopic(2)
      const requests = yield* Effect.forEach(Array.from({ length: 16 }), (_, i) =>
        publishRequest(topic, { partition: i % 2, headers: { n: String(i) } })
      )
      const receipts = yield* publishAll(requests)
      const onOne = receipts.filter((r) => r.partition === 1)
      // Wanted out of order, with a duplicate and an offset the partition never held.
      const wanted = [onOne[6]!.offset, onOne[2]!.offset, onOne[4]!.offset, onOne[2]!.offset, "999999"]
      const records = yield* Stream.runCollect(reader.readAt!({ topic, partition: 1, offsets: wanted }))
      assert.deepStrictEqual(
        records.map((r) => [r.partition, r.offset, r.headers.n]),
        [2, 4, 6].map((i) => [1, onOne[i]!.offset, String(2 * i + 1)])
      )
      const none = yield* Stream.runCollect(reader.readAt!({ topic, partition: 0, offsets: ["999999"] }))
      assert.deepStrictEqual(none, [])
      const error = yield* Effect.flip(
        Stream.runCollect(reader.readAt!({ topic: topics.topicName(), partition: 0, offsets: ["0"] }))
      )
      assert.strictEqual(error._tag, "ConsumerSourceError")
      assert.isFalse(error.retriable)
    })
}
