/**
 * The conformance suite of the `TopicReader` port (dead-letter inspection and replay): a
 * read returns every retained record of a topic as it was when the read started — each
 * partition in offset order, the records as they were published — then ends; it commits
 * nothing, so reading again returns the same records; a missing topic is a non-retriable read
 * error. Records published while the read runs are not part of it, so a replay into the same
 * topic terminates.
 *
 * Each test creates its own uniquely named topics through `BrokerAdmin` and publishes through
 * `Publisher`, so the suite runs against a shared real broker. The suite is a table of named
 * cases (Watermill's shape): {@link cases} lists them, {@link suite} registers them.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { registerCases } from "./internal/caseTable.ts"
import { publishRequest } from "./internal/conformance.ts"
import { type DeleteTopics, type Topics, withTopics } from "./internal/suiteTopics.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = TopicReader | Publisher | BrokerAdmin

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Fresh services for every test; may provide extra services `R` that `deleteTopics` uses. */
  readonly layer: () => Layer.Layer<Services | R, unknown>
  /** Deletes the topics a test created when it ends (failures ignored). Default: left behind. */
  readonly deleteTopics?: DeleteTopics<Services | R>
  /** Prefix of every topic the suite creates (default `"reader-conformance"`). */
  readonly topicPrefix?: string
  /** Per-test timeout in milliseconds (default 120 000). */
  readonly timeout?: number
}

/**
 * One named case.
 *
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly run: (topics: Topics) => Effect.Effect<void, unknown, Services>
}

const decoder = new TextDecoder()

/** Publishes `requests`, failing the test on any record that did not land. */
const publishAll = (requests: ReadonlyArray<PublishRequest>) =>
  Effect.gen(function* () {
    const outcomes = yield* (yield* Publisher).publish(requests)
    return outcomes.map((outcome): PublishReceipt => {
      if (Result.isFailure(outcome)) throw new Error(`publish failed: ${outcome.failure.message}`)
      return outcome.success
    })
  })

const readAll = (topic: string) =>
  Effect.gen(function* () {
    return yield* Stream.runCollect((yield* TopicReader).read(topic))
  })

/** `partition/offset`: where a record is. */
const at = (r: { readonly partition: number; readonly offset: string }) => `${r.partition}/${r.offset}`

const assertOffsetOrder = (records: ReadonlyArray<ConsumerRecord>) => {
  for (const partition of new Set(records.map((r) => r.partition))) {
    const offsets = records.filter((r) => r.partition === partition).map((r) => BigInt(r.offset))
    for (let i = 1; i < offsets.length; i++) {
      assert.isTrue(offsets[i - 1]! < offsets[i]!, `partition ${partition} out of offset order: ${offsets.join(",")}`)
    }
  }
}

const readsEverything: Case = {
  name: "a read returns every record of every partition, each in offset order, as published, then ends",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.make(3)
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

const emptyTopic: Case = {
  name: "a topic with no records is an empty stream",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.make(2)
      assert.deepStrictEqual(yield* readAll(topic), [])
    })
}

const missingTopic: Case = {
  name: "a topic that does not exist fails the read with a non-retriable ConsumerSourceError",
  run: (topics) =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(readAll(topics.name()))
      assert.strictEqual(error._tag, "ConsumerSourceError")
      assert.strictEqual(error.operation, "read")
      assert.isFalse(error.retriable)
    })
}

const replayTerminates: Case = {
  name: "records published while the read runs are not part of it: replaying into the same topic terminates",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.make(2)
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

const commitsNothing: Case = {
  name: "a read commits nothing: a second read returns the same records",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.make(2)
      yield* publishAll(yield* Effect.forEach([0, 1, 1], (partition) => publishRequest(topic, { partition })))
      const first = (yield* readAll(topic)).map(at).sort()
      const second = (yield* readAll(topic)).map(at).sort()
      assert.strictEqual(first.length, 3)
      assert.deepStrictEqual(second, first)
    })
}

const readsBeyondOneFetch: Case = {
  name: "a topic larger than one fetch is read whole, in order",
  run: (topics) =>
    Effect.gen(function* () {
      const topic = yield* topics.make(2)
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

/**
 * Every case of the suite, in the order it runs them.
 *
 * @since 0.1.0
 * @category suites
 */
export const cases: ReadonlyArray<Case> = [
  readsEverything,
  emptyTopic,
  missingTopic,
  replayTerminates,
  commitsNothing,
  readsBeyondOneFetch
]

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const prefix = options.topicPrefix ?? "reader-conformance"
  registerCases(`${name} (TopicReader conformance)`, cases, {
    run: (c) => withTopics(prefix, options.deleteTopics, c.run).pipe(Effect.provide(options.layer())),
    timeout: options.timeout ?? 120_000
  })
}
