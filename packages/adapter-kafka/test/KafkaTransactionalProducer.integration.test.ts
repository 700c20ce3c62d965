// Kafka transactions on the real broker (R7.1): kafkajs 2.2.4 against Apache Kafka 4.4.0.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as TransactionalPipeline from "@effect-outbox/core/TransactionalPipeline"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaTransactionalProducer from "../src/KafkaTransactionalProducer.ts"
import { freshTopic, KafkaTest, request, text } from "./support.ts"

const groupOffsets = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    const [result] = yield* Effect.promise(() => admin.fetchOffsets({ groupId, topics: [topic] }))
    return Object.fromEntries(result!.partitions.map((p) => [p.partition, p.offset]))
  })

/** A transactional producer with its own id, closed with the test's scope. */
const transactional = (transactionalId = `adapter-kafka-tx-${randomUUID()}`) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(KafkaTransactionalProducer.layer({ transactionalId }))
    return Context.get(context, TransactionalProducer)
  })

/**
 * The committed records of `topic`, once at least `n` are visible. `commit()` returns when the
 * coordinator has decided; it writes the commit markers to the partitions right after, so a
 * read_committed reader may need a moment to see the transaction.
 */
const readCommitted = (topic: string, n: number) =>
  Effect.gen(function* () {
    const reader = yield* TopicReader
    const deadline = Date.now() + 15_000
    while (true) {
      const records = yield* Stream.runCollect(reader.read(topic))
      if (records.length >= n || Date.now() > deadline) return records
      yield* Effect.sleep("100 millis")
    }
  })

layer(KafkaTest, { timeout: "120 seconds", excludeTestServices: true })("KafkaTransactionalProducer", (it) => {
  it.effect("a committed transaction makes its records visible and commits the group's offsets with them", () =>
    Effect.gen(function* () {
      const output = yield* freshTopic(2, "out")
      const input = yield* freshTopic(1, "in")
      const groupId = `adapter-kafka-eos-${randomUUID()}`
      const producer = yield* transactional()
      const records = yield* Effect.forEach([0, 1, 0], (partition, i) =>
        request(output, { partition, payload: `r${i}` })
      )
      const receipts = yield* producer.commit({
        groupId,
        records,
        offsets: [{ topic: input, partition: 0, offset: "7" }]
      })
      assert.deepStrictEqual(
        receipts.map((r) => [r.partition, r.offset]),
        [
          [0, "0"],
          [1, "0"],
          [0, "1"]
        ]
      )
      const visible = yield* readCommitted(output, 3)
      assert.deepStrictEqual(visible.map((r) => text(r.value)).sort(), ["r0", "r1", "r2"])
      assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "7" })
    })
  )

  it.effect(
    "an aborted transaction leaves its records in the log but invisible to read_committed, and no offsets",
    () =>
      Effect.gen(function* () {
        const output = yield* freshTopic(1, "out")
        const input = yield* freshTopic(1, "in")
        const groupId = `adapter-kafka-eos-${randomUUID()}`
        const producer = yield* transactional()
        const doomed = yield* request(output, { partition: 0, payload: "doomed" })
        // Offsets for a topic that does not exist make the broker refuse the transaction's
        // offset commit after the record was written: the transaction aborts.
        const error = yield* Effect.flip(
          producer.commit({
            groupId,
            records: [doomed],
            offsets: [
              { topic: input, partition: 0, offset: "1" },
              { topic: `${input}-missing`, partition: 0, offset: "1" }
            ]
          })
        )
        assert.strictEqual(error._tag, "TransactionAbortedError")
        const kept = yield* request(output, { partition: 0, payload: "kept" })
        yield* producer.commit({ groupId, records: [kept], offsets: [{ topic: input, partition: 0, offset: "2" }] })
        // read_committed sees only the committed record…
        assert.deepStrictEqual(
          (yield* readCommitted(output, 1)).map((r: ConsumerRecord) => text(r.value)),
          ["kept"]
        )
        // …while the aborted one did reach the log (the probe reads uncommitted).
        const found = yield* (yield* BrokerProbe).find({ topic: output, partition: 0, eventId: doomed.id, since: 0 })
        assert.isTrue(Option.isSome(found))
        assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "2" })
      })
  )

  it.effect("a newer producer with the same transactionalId fences the older one", () =>
    Effect.gen(function* () {
      const output = yield* freshTopic(1, "out")
      const transactionalId = `adapter-kafka-tx-${randomUUID()}`
      const groupId = `adapter-kafka-eos-${randomUUID()}`
      const older = yield* transactional(transactionalId)
      yield* older.commit({ groupId, records: [yield* request(output, { payload: "old" })], offsets: [] })
      const newer = yield* transactional(transactionalId)
      yield* newer.commit({ groupId, records: [yield* request(output, { payload: "new" })], offsets: [] })
      const error = yield* Effect.flip(
        older.commit({ groupId, records: [yield* request(output, { payload: "zombie" })], offsets: [] })
      )
      assert.strictEqual(error._tag, "TransactionAbortedError")
      assert.deepStrictEqual((yield* readCommitted(output, 2)).map((r) => text(r.value)).sort(), ["new", "old"])
    })
  )

  it.effect(
    "TransactionalPipeline refuses to run on kafkajs (offsets cannot carry the group generation): nothing is consumed or produced",
    () =>
      Effect.gen(function* () {
        const input = yield* freshTopic(1, "in")
        const output = yield* freshTopic(1, "out")
        const groupId = `adapter-kafka-eos-${randomUUID()}`
        yield* (yield* Publisher).publish([yield* request(input, { partition: 0, payload: "in-0" })])
        const producer = yield* transactional()
        assert.strictEqual(producer.fencing._tag, "Unsupported")
        const error = yield* TransactionalPipeline.run({
          groupId,
          topics: [input],
          fromBeginning: true,
          transform: (record) => Effect.succeed([{ topic: output, key: record.key, payload: record.value }])
        }).pipe(Effect.provideService(TransactionalProducer, producer), Effect.flip)
        assert.strictEqual(error._tag, "TransactionalFencingError")
        assert.include(error.message, "TxnOffsetCommit v1")
        assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "-1" })
        assert.deepStrictEqual(yield* Stream.runCollect((yield* TopicReader).read(output)), [])
      })
  )
})
