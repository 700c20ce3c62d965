// Consumer lag on the real broker (R8.1): `Telemetry.sampleConsumerLag` reads the group's
// committed offsets and the log end through KafkaBrokerAdmin and sets `outbox_consumer_lag`.
// The gauge must tell the truth when it matters most: while the consumer is stuck retrying a
// record, it commits nothing, so the lag holds (and grows with new records) until it moves on.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import * as Consumer from "@effect-outbox/core/Consumer"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Inbox from "@effect-outbox/core/Inbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as KafkaTransactionalProducer from "../src/KafkaTransactionalProducer.ts"
import { freshTopic, KafkaTest, namedTopic, request } from "./support.ts"

const Order = Schema.Struct({ n: Schema.Number })

class NotYet extends Schema.TaggedError<NotYet>()("NotYet", { n: Schema.Number }) {}

const Live = Layer.mergeAll(Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)), KafkaTest)

layer(Live, { timeout: "120 seconds", excludeTestServices: true })("consumer lag on Kafka", (it) => {
  it.effect("the gauge reads the records not yet committed, holds while a record is retried, then reaches 0", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1, "lag")
      yield* namedTopic(`${topic}.DLT`, 1)
      const groupId = `adapter-kafka-lag-${randomUUID()}`
      const gauge = Metric.withAttributes(Telemetry.consumerLag, { group: groupId, topic, partition: "0" })
      const publish = (ns: ReadonlyArray<number>) =>
        Effect.gen(function* () {
          const requests = yield* Effect.forEach(ns, (n) =>
            Effect.map(request(topic, { key: "k", partition: 0 }), (r) => ({ ...r, payload: jsonPayload({ n }) }))
          )
          const outcomes = yield* (yield* Publisher).publish(requests)
          assert.isTrue(outcomes.every((o) => o._tag === "Success"))
        })
      const sample = Effect.map(
        Telemetry.sampleConsumerLag({ groupId, topics: [topic], fromBeginning: true }),
        (rows) => {
          assert.strictEqual(rows.length, 1)
          return rows[0]!
        }
      )
      const gaugeValue = Effect.map(Metric.value(gauge), (state) => state.value)
      const until = (label: string, check: (row: Telemetry.PartitionLag) => boolean) =>
        Effect.gen(function* () {
          const deadline = Date.now() + 60_000
          while (true) {
            const row = yield* sample
            if (check(row)) return row
            if (Date.now() > deadline) assert.fail(`timed out waiting until ${label}; last: ${JSON.stringify(row)}`)
            yield* Effect.sleep("100 millis")
          }
        })

      // Before anyone consumed: the group lags by the whole log.
      yield* publish([1, 2, 3])
      assert.strictEqual((yield* sample).lag, 3)
      assert.strictEqual(yield* gaugeValue, 3)

      const stuck = yield* Ref.make(true)
      const tries = yield* Ref.make(0)
      const processed = yield* Ref.make<ReadonlyArray<number>>([])
      yield* Consumer.make({
        groupId,
        topics: [topic],
        schema: Order,
        fromBeginning: true,
        // Retried (transient) until the test lets it through: a consumer stuck on one record.
        maxAttempts: 10_000,
        retrySchedule: Schedule.spaced("50 millis"),
        handler: ({ payload }) =>
          Effect.gen(function* () {
            if (payload.n === 4 && (yield* Ref.get(stuck))) {
              yield* Ref.update(tries, (n) => n + 1)
              return yield* new NotYet({ n: 4 })
            }
            yield* Ref.update(processed, (all) => [...all, payload.n])
          })
      })

      // The first three are processed and committed: no lag.
      const caughtUp = yield* until("the first three are committed", (row) => row.committed === "3")
      assert.strictEqual(caughtUp.lag, 0)
      assert.strictEqual(yield* gaugeValue, 0)

      // Seven more; the first of them is retried over and over.
      yield* publish([4, 5, 6, 7, 8, 9, 10])
      while ((yield* Ref.get(tries)) < 5) yield* Effect.sleep("50 millis")
      const held = yield* sample
      assert.strictEqual(held.committed, "3")
      assert.strictEqual(held.end, "10")
      assert.strictEqual(held.lag, 7)
      assert.strictEqual(yield* gaugeValue, 7)
      // Still stuck, the log grows: so does the lag.
      yield* publish([11, 12])
      const grown = yield* sample
      assert.isAtLeast(yield* Ref.get(tries), 5)
      assert.strictEqual(grown.lag, 9)
      assert.strictEqual(yield* gaugeValue, 9)
      assert.deepStrictEqual(yield* Ref.get(processed), [1, 2, 3])

      // Let it through: everything is processed, committed, and the lag reaches 0.
      yield* Ref.set(stuck, false)
      const done = yield* until("everything is committed", (row) => row.lag === 0)
      assert.strictEqual(done.committed, "12")
      assert.strictEqual(yield* gaugeValue, 0)
      assert.deepStrictEqual(yield* Ref.get(processed), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    })
  )
  it.effect(
    "records written in Kafka transactions: once all are committed the lag is 0 (commit markers do not count)",
    () =>
      Effect.gen(function* () {
        const topic = yield* freshTopic(1, "lag-tx")
        const groupId = `adapter-kafka-lag-tx-${randomUUID()}`
        const producer = Context.get(
          yield* Layer.build(
            KafkaTransactionalProducer.layer({ transactionalId: `adapter-kafka-lag-tx-${randomUUID()}` })
          ),
          TransactionalProducer
        )
        // Two transactions of two records: offsets 0, 1, marker 2, then 3, 4, marker 5.
        for (const pair of [
          [1, 2],
          [3, 4]
        ]) {
          const records = yield* Effect.forEach(pair, (n) =>
            Effect.map(request(topic, { key: "k", partition: 0 }), (r) => ({ ...r, payload: jsonPayload({ n }) }))
          )
          yield* producer.commit({ groupId: `${groupId}-producer`, records, offsets: [] })
        }
        const sample = Effect.map(
          Telemetry.sampleConsumerLag({ groupId, topics: [topic], fromBeginning: true }),
          (rows) => rows[0]!
        )
        // The markers are in the log: the end is past them.
        let before = yield* sample
        for (let i = 0; i < 50 && before.end !== "6"; i++) {
          yield* Effect.sleep("100 millis")
          before = yield* sample
        }
        assert.strictEqual(before.end, "6")
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* (yield* ConsumerSource).subscribe({
              groupId,
              topics: [topic],
              fromBeginning: true
            })
            const records = yield* subscription.batches.pipe(
              Stream.flatMap((batch) => Stream.fromIterable(batch.records)),
              Stream.take(4),
              Stream.runCollect
            )
            assert.deepStrictEqual(
              records.map((r) => r.offset),
              ["0", "1", "3", "4"]
            )
            // What a consumer commits after the last record it processed: its offset + 1.
            yield* subscription.commit([{ topic, partition: 0, offset: "5" }])
          })
        )
        const after = yield* sample
        assert.strictEqual(after.committed, "6")
        assert.strictEqual(after.lag, 0)
      })
  )
  it.effect("an aborted transaction after everything was committed: the group is committed past it, lag 0", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1, "lag-abort")
      const groupId = `adapter-kafka-lag-abort-${randomUUID()}`
      const producer = Context.get(
        yield* Layer.build(
          KafkaTransactionalProducer.layer({ transactionalId: `adapter-kafka-lag-abort-${randomUUID()}` })
        ),
        TransactionalProducer
      )
      const record = (n: number) =>
        Effect.map(request(topic, { key: "k", partition: 0 }), (r) => ({ ...r, payload: jsonPayload({ n }) }))
      // Offsets 0, 1 and the commit marker 2.
      yield* producer.commit({
        groupId: `${groupId}-producer`,
        records: [yield* record(1), yield* record(2)],
        offsets: []
      })
      const sample = Effect.map(
        Telemetry.sampleConsumerLag({ groupId, topics: [topic], fromBeginning: true }),
        (rows) => rows[0]!
      )
      const until = (label: string, check: (row: Telemetry.PartitionLag) => boolean) =>
        Effect.gen(function* () {
          for (let i = 0; i < 200; i++) {
            const row = yield* sample
            if (check(row)) return row
            yield* Effect.sleep("100 millis")
          }
          return assert.fail(`timed out waiting until ${label}; last: ${JSON.stringify(yield* sample)}`)
        })
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* (yield* ConsumerSource).subscribe({
            groupId,
            topics: [topic],
            fromBeginning: true
          })
          const records = yield* subscription.batches.pipe(
            Stream.flatMap((batch) => Stream.fromIterable(batch.records)),
            Stream.take(2),
            Stream.runCollect
          )
          assert.deepStrictEqual(
            records.map((r) => r.offset),
            ["0", "1"]
          )
          yield* subscription.commit([{ topic, partition: 0, offset: "2" }])
          assert.strictEqual((yield* until("offset 3 is committed", (row) => row.committed === "3")).lag, 0)
          // An aborted transaction: record 3 and the abort marker 4 are in the log, nothing to
          // deliver. The member, still subscribed, commits past them by itself.
          const aborted = yield* Effect.flip(
            producer.commit({
              groupId: `${groupId}-producer`,
              records: [yield* record(3)],
              offsets: [{ topic: `${topic}-missing`, partition: 0, offset: "1" }]
            })
          )
          assert.strictEqual(aborted._tag, "TransactionAbortedError")
          const after = yield* until(
            "the group is committed past the aborted transaction",
            (row) => row.lag === 0 && row.end === "5"
          )
          assert.strictEqual(after.committed, "5")
        })
      )
    })
  )
})
