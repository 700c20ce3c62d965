// Kafka transactions on the real broker through @platformatic/kafka (R7.1): commit visible to
// read_committed consumers, abort invisible, offsets committed atomically with the output,
// fencing, and TransactionalPipeline exactly once. The same cases as the kafkajs adapter's test,
// plus a group consumer reading past several aborted transactions of one transactional id.
import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { type ConsumerRecord, ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as TransactionalPipeline from "@effect-outbox/core/TransactionalPipeline"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as PlatformaticTransactionalProducer from "../src/PlatformaticTransactionalProducer.ts"
import { namedTopic, PlatformaticTest, publishRequest, text, uniqueName } from "./support.ts"

const freshTopic = (partitions: number, name: string) =>
  namedTopic(uniqueName(`adapter-platformatic-tx-${name}`), partitions)

const request = (topic: string, fields: { partition?: number; key?: string; payload: string }) =>
  publishRequest(topic, {
    partition: fields.partition ?? null,
    key: fields.key ?? null,
    payload: new TextEncoder().encode(fields.payload)
  })

/** The group's committed offsets on `topic`, by partition (only partitions it committed). */
const groupOffsets = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const offsets = yield* (yield* BrokerAdmin).groupOffsets({ groupId, topics: [topic] })
    return Object.fromEntries(offsets.flatMap((o) => (o.committed === null ? [] : [[o.partition, o.committed]])))
  })

/** A transactional producer with its own id, closed with the test's scope. */
const transactional = (transactionalId = `adapter-platformatic-tx-${randomUUID()}`) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(PlatformaticTransactionalProducer.layer({ transactionalId }))
    return Context.get(context, TransactionalProducer)
  })

/**
 * The committed records of `topic` as a read_committed group sees them, once at least `n` arrived
 * and a pause brought no more (so a record that should stay invisible had its chance to appear).
 */
const readByGroup = (topic: string, n: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const source = yield* ConsumerSource
      const subscription = yield* source.subscribe({ groupId: `tx-reader-${randomUUID()}`, topics: [topic] })
      const seen: Array<ConsumerRecord> = []
      const fiber = yield* subscription.batches.pipe(
        Stream.runForEach((batch) => Effect.sync(() => seen.push(...batch.records))),
        Effect.forkChild
      )
      const deadline = Date.now() + 30_000
      while (seen.length < n && Date.now() < deadline) yield* Effect.sleep("100 millis")
      yield* Effect.sleep("2 seconds")
      yield* Fiber.interrupt(fiber)
      return seen.map((r) => text(r.value))
    })
  )

/** What the topic reader returns, once at least `n` records are visible (markers come just after commit). */
const readCommitted = (topic: string, n: number) =>
  Effect.gen(function* () {
    const reader = yield* TopicReader
    const deadline = Date.now() + 15_000
    while (true) {
      const records = yield* Stream.runCollect(reader.read(topic))
      if (records.length >= n || Date.now() > deadline) return records.map((r) => text(r.value))
      yield* Effect.sleep("100 millis")
    }
  })

layer(PlatformaticTest, { timeout: "120 seconds", excludeTestServices: true })(
  "PlatformaticTransactionalProducer",
  (it) => {
    it.effect("a committed transaction makes its records visible and commits the group's offsets with them", () =>
      Effect.gen(function* () {
        const output = yield* freshTopic(2, "out")
        const input = yield* freshTopic(1, "in")
        const groupId = `adapter-platformatic-eos-${randomUUID()}`
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
        assert.deepStrictEqual((yield* readByGroup(output, 3)).sort(), ["r0", "r1", "r2"])
        assert.deepStrictEqual((yield* readCommitted(output, 3)).sort(), ["r0", "r1", "r2"])
        assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "7" })
      })
    )

    it.effect("an aborted transaction leaves its records in the log, invisible to read_committed, and no offsets", () =>
      Effect.gen(function* () {
        const output = yield* freshTopic(1, "out")
        const input = yield* freshTopic(1, "in")
        const groupId = `adapter-platformatic-eos-${randomUUID()}`
        const producer = yield* transactional()
        // Offsets for a topic that does not exist fail the transaction after its record was
        // written: it aborts. Twice, around a committed one, all of one transactional id.
        const abort = (payload: string, offset: string) =>
          Effect.gen(function* () {
            const doomed = yield* request(output, { partition: 0, payload })
            const error = yield* Effect.flip(
              producer.commit({
                groupId,
                records: [doomed],
                offsets: [
                  { topic: input, partition: 0, offset },
                  { topic: `${input}-missing`, partition: 0, offset }
                ]
              })
            )
            assert.strictEqual(error._tag, "TransactionAbortedError")
            return doomed
          })
        const doomed = yield* abort("doomed-1", "1")
        const kept = yield* request(output, { partition: 0, payload: "kept" })
        yield* producer.commit({ groupId, records: [kept], offsets: [{ topic: input, partition: 0, offset: "2" }] })
        yield* abort("doomed-2", "3")
        const last = yield* request(output, { partition: 0, payload: "last" })
        yield* producer.commit({ groupId, records: [last], offsets: [] })
        // read_committed (a group member and the topic reader) sees only the committed records…
        assert.deepStrictEqual(yield* readByGroup(output, 2), ["kept", "last"])
        assert.deepStrictEqual(yield* readCommitted(output, 2), ["kept", "last"])
        // …while the aborted ones did reach the log (the probe reads uncommitted).
        const found = yield* (yield* BrokerProbe).find({ topic: output, partition: 0, eventId: doomed.id, since: 0 })
        assert.isTrue(Option.isSome(found))
        // Only the committed transaction's offset counts.
        assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "2" })
      })
    )

    it.effect("a newer producer with the same transactionalId fences the older one", () =>
      Effect.gen(function* () {
        const output = yield* freshTopic(1, "out")
        const transactionalId = `adapter-platformatic-tx-${randomUUID()}`
        const groupId = `adapter-platformatic-eos-${randomUUID()}`
        const older = yield* transactional(transactionalId)
        yield* older.commit({ groupId, records: [yield* request(output, { payload: "old" })], offsets: [] })
        const newer = yield* transactional(transactionalId)
        yield* newer.commit({ groupId, records: [yield* request(output, { payload: "new" })], offsets: [] })
        const error = yield* Effect.flip(
          older.commit({ groupId, records: [yield* request(output, { payload: "zombie" })], offsets: [] })
        )
        assert.strictEqual(error._tag, "TransactionAbortedError")
        assert.isFalse(error.retriable, error.reason)
        assert.deepStrictEqual((yield* readCommitted(output, 2)).sort(), ["new", "old"])
      })
    )

    it.effect("a partition the topic does not have aborts before anything is sent, not retriable", () =>
      Effect.gen(function* () {
        const output = yield* freshTopic(1, "out")
        const producer = yield* transactional()
        const error = yield* Effect.flip(
          producer.commit({
            groupId: `adapter-platformatic-eos-${randomUUID()}`,
            records: [yield* request(output, { partition: 3, payload: "nowhere" })],
            offsets: []
          })
        )
        assert.isFalse(error.retriable, error.reason)
        assert.include(error.reason, "no partition 3")
        // The producer still works afterwards.
        yield* producer.commit({
          groupId: `g-${randomUUID()}`,
          records: [yield* request(output, { payload: "after" })],
          offsets: []
        })
        assert.deepStrictEqual(yield* readCommitted(output, 1), ["after"])
      })
    )

    it.effect(
      "TransactionalPipeline: every input's output appears exactly once, with the inputs' offsets committed",
      () =>
        Effect.gen(function* () {
          const input = yield* freshTopic(2, "in")
          const output = yield* freshTopic(2, "out")
          const groupId = `adapter-platformatic-eos-${randomUUID()}`
          const inputs = yield* Effect.forEach(
            Array.from({ length: 10 }, (_, i) => i),
            (i) => request(input, { partition: i % 2, key: `k${i % 2}`, payload: `in-${i}` })
          )
          yield* (yield* Publisher).publish(inputs)
          const producer = yield* transactional()
          const fiber = yield* TransactionalPipeline.run({
            groupId,
            topics: [input],
            fromBeginning: true,
            transform: (record) =>
              Effect.succeed([
                { topic: output, key: record.key, payload: new TextEncoder().encode(`out-${text(record.value)}`) }
              ])
          }).pipe(Effect.provideService(TransactionalProducer, producer), Effect.forkChild)
          const deadline = Date.now() + 60_000
          while (Date.now() < deadline) {
            const offsets = yield* groupOffsets(groupId, input)
            if (offsets[0] === "5" && offsets[1] === "5") break
            yield* Effect.sleep("200 millis")
          }
          yield* Fiber.interrupt(fiber)
          assert.deepStrictEqual(yield* groupOffsets(groupId, input), { 0: "5", 1: "5" })
          const produced = (yield* readByGroup(output, inputs.length)).sort()
          assert.deepStrictEqual(produced, inputs.map((r) => `out-${text(r.payload)}`).sort())
        })
    )
  }
)
