import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as InMemoryParkedStore from "@effect-outbox/testing/InMemoryParkedStore"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { ConnectionError, DeadlockError, SqlError, type SqlErrorReason, UnknownError } from "effect/sql/SqlError"
import * as TestClock from "effect/testing/TestClock"
import { BrokerAdmin } from "../src/BrokerAdmin.ts"
import * as Consumer from "../src/Consumer.ts"
import { ConsumerSource } from "../src/ConsumerSource.ts"
import * as DeadLetter from "../src/DeadLetter.ts"
import {
  BrokerUnavailableError,
  type FailureKind,
  PermanentPublishError,
  RetriablePublishError,
  StoreError
} from "../src/Errors.ts"
import * as Inbox from "../src/Inbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import { jsonPayload, ORIGINAL_RECORD_HEADER } from "../src/OutboxMessage.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import { ParkedStore } from "../src/ParkedStore.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Telemetry from "../src/Telemetry.ts"
import { type PositionedRead, TopicReader } from "../src/TopicReader.ts"
import * as Transition from "../src/Transition.ts"
import { committedOffset, eventually } from "./support/consumerTest.ts"

// -- fixtures ---------------------------------------------------------------------------------

const Order = Schema.Struct({ n: Schema.Number })
type Order = typeof Order.Type

const id = (n: number) => `0190a0a0-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId

class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", {
  n: Schema.Number,
  retriable: Schema.Boolean
}) {}

const makeLayer = (topics: Record<string, number> = { orders: 1, "orders.DLT": 1 }) =>
  Layer.mergeAll(
    Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)),
    InMemoryTopicReader.layer.pipe(Layer.provideMerge(InMemoryBroker.layer({ topics })))
  )

/** Publishes record `n` (event id `id(n)`) to `orders`. */
const send = (
  n: number,
  options: { key?: string | null; payload?: unknown; partition?: number; eventId?: boolean } = {}
) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const [outcome] = yield* publisher.publish([
      {
        id: id(n),
        topic: "orders",
        key: options.key === undefined ? `k${n}` : options.key,
        partition: options.partition ?? 0,
        headers: options.eventId === false ? {} : { "event-id": id(n) },
        payload: jsonPayload(options.payload ?? { n }),
        // A record from a producer that writes no event id.
        ...(options.eventId === false ? { writeEventId: false } : {})
      }
    ])
    assert.strictEqual(outcome!._tag, "Success")
  })

/** Inserts outbox row `n` and moves it to `status` through the transition helper. */
const outboxRow = (n: number, status: "DISPATCHING" | "PUBLISHED") =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    yield* store.insert([
      {
        id: id(n),
        topic: "orders",
        key: `k${n}`,
        partition: 0,
        headers: { "event-id": id(n) },
        payload: jsonPayload({ n }),
        status: "PENDING",
        availableAt: 0,
        createdAt: 0
      }
    ])
    const claimed = yield* Transition.claim({ owner: "relay", limit: 10, maxPerKey: 10, leaseMillis: 60_000 })
    assert.isTrue(claimed.some((row) => row.id === id(n)))
    if (status === "PUBLISHED") {
      yield* Transition.markPublished([{ id: id(n), receipt: { topic: "orders", partition: 0, offset: "0" } }])
    }
  })

const statusOf = (n: number) =>
  Effect.flatMap(InMemoryDatabase.InMemoryDatabase, (db) => InMemoryDatabase.statusOf(db, id(n)))

/** Closes a scope while the TestClock keeps moving (shutdown may wait on retries' sleeps). */
const closeScope = (scope: Scope.Closeable) =>
  Effect.gen(function* () {
    const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
    yield* eventually(
      "the scope closed",
      Effect.map(Fiber.await(closing).pipe(Effect.timeoutOption(0)), (o) => o._tag === "Some")
    )
  })

const dltRecords = Effect.flatMap(InMemoryBroker.InMemoryBroker, (broker) => broker.records("orders.DLT"))

/** A handler that records every call by payload `n`. */
const recording = Effect.map(Ref.make<ReadonlyArray<Consumer.Message<Order>>>([]), (calls) => ({
  calls,
  handler: (message: Consumer.Message<Order>) => Ref.update(calls, (all) => [...all, message]),
  ns: Effect.map(Ref.get(calls), (all) => all.map((m) => m.payload.n))
}))

const commonOptions = {
  groupId: "billing",
  topics: ["orders"],
  schema: Order,
  fromBeginning: true,
  retrySchedule: Schedule.spaced("1 second")
} as const

// -- processing -------------------------------------------------------------------------------

// Every behaviour holds the same with a transaction per record and one per fetched batch.
for (const transaction of ["per-record", "per-batch"] as const) {
  const baseOptions = { ...commonOptions, transaction } as const

  describe(`Consumer (${transaction})`, () => {
    it.effect("hands each record to the handler with its event id as the idempotency key, then commits", () =>
      Effect.gen(function* () {
        const { calls, handler, ns } = yield* recording
        yield* send(1)
        yield* send(2)
        yield* send(3, { eventId: false })
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 3 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "3")
        )
        assert.deepStrictEqual(yield* ns, [1, 2, 3])
        const messages = yield* Ref.get(calls)
        assert.strictEqual(messages[0]!.idempotencyKey, id(1))
        assert.strictEqual(messages[0]!.eventId, id(1))
        assert.strictEqual(messages[0]!.attempt, 1)
        // without an event id the key falls back to the record's offset identity
        assert.strictEqual(messages[2]!.eventId, null)
        assert.strictEqual(messages[2]!.idempotencyKey, "offset:orders/0/2")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a duplicate delivery of the same event (republished) runs the handler once", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1)
        yield* send(1) // the relay re-sent it after a lost acknowledgement (R1.5)
        yield* send(2)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 3 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "3")
        )
        assert.deepStrictEqual(yield* ns, [1, 2])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("with the offset identity a republished event is new work", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1)
        yield* send(1)
        yield* Consumer.make({ ...baseOptions, identity: "offset", handler })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [1, 1])
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const keys = [...(yield* db.processedKeys)].sort()
        assert.deepStrictEqual(keys, [
          InMemoryDatabase.processedKey("billing", "offset:orders/0/0"),
          InMemoryDatabase.processedKey("billing", "offset:orders/0/1")
        ])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("the offset is committed only after the handler's transaction committed (R4.5)", () =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const started = yield* Deferred.make<void>()
        yield* send(1)
        yield* Consumer.make({
          ...baseOptions,
          handler: () => Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(gate)))
        })
        yield* Deferred.await(started)
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
        assert.strictEqual(yield* committedOffset("billing"), undefined)
        const db = yield* InMemoryDatabase.InMemoryDatabase
        assert.strictEqual((yield* db.processedKeys).size, 0)
        yield* Deferred.succeed(gate, undefined)
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        assert.strictEqual((yield* db.processedKeys).size, 1)
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a failed database commit leaves the offset where it was and the record is retried", () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const { handler, ns } = yield* recording
        yield* db.failNext({ count: 1, operations: ["commit"], retriable: true })
        yield* send(1)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        // first try rolled back, second committed: the effect exists once
        assert.deepStrictEqual(yield* ns, [1, 1])
        assert.strictEqual((yield* db.processedKeys).size, 1)
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a crash between the DB commit and the offset commit redelivers, and the inbox absorbs it", () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const { handler, ns } = yield* recording
        yield* send(1)
        yield* send(2)
        // every offset commit of the first member is lost
        yield* broker.failNext({ operation: "commit", count: 1_000 })
        const first = yield* Scope.make()
        yield* Consumer.make({ ...baseOptions, handler }).pipe(Scope.provide(first))
        yield* eventually(
          "both records are processed",
          Effect.map(ns, (all) => all.length === 2)
        )
        yield* closeScope(first)
        assert.strictEqual(yield* committedOffset("billing"), undefined)
        yield* broker.clearFaults
        // the next member gets both records again
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [1, 2])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("partitions keep their own order and are processed concurrently", () =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const firstStarted = yield* Deferred.make<void>()
        const seen = yield* Ref.make<ReadonlyArray<string>>([])
        for (const n of [1, 2, 3]) yield* send(n, { partition: 0 })
        for (const n of [4, 5, 6]) yield* send(n, { partition: 1 })
        yield* Consumer.make({
          ...baseOptions,
          handler: (m) =>
            Effect.gen(function* () {
              // each partition waits on the other: only possible if they run concurrently
              if (m.payload.n === 1)
                yield* Deferred.succeed(firstStarted, undefined).pipe(Effect.andThen(Deferred.await(gate)))
              if (m.payload.n === 4) yield* Deferred.await(firstStarted)
              if (m.payload.n === 6) yield* Deferred.succeed(gate, undefined)
              yield* Ref.update(seen, (all) => [...all, `${m.record.partition}:${m.payload.n}`])
            })
        })
        yield* eventually(
          "all six are processed",
          Effect.map(Ref.get(seen), (all) => all.length === 6)
        )
        const all = yield* Ref.get(seen)
        assert.deepStrictEqual(
          all.filter((s) => s.startsWith("0:")),
          ["0:1", "0:2", "0:3"]
        )
        assert.deepStrictEqual(
          all.filter((s) => s.startsWith("1:")),
          ["1:4", "1:5", "1:6"]
        )
      }).pipe(Effect.scoped, Effect.provide(makeLayer({ orders: 2, "orders.DLT": 1 })))
    )

    it.effect("graceful shutdown lets the record in flight finish and commits it", () =>
      Effect.gen(function* () {
        const started = yield* Deferred.make<void>()
        const done = yield* Ref.make(false)
        yield* send(1)
        const scope = yield* Scope.make()
        yield* Consumer.make({
          ...baseOptions,
          handler: () =>
            Deferred.succeed(started, undefined).pipe(
              Effect.andThen(Effect.sleep("2 seconds")),
              Effect.andThen(Ref.set(done, true))
            )
        }).pipe(Scope.provide(scope))
        yield* Deferred.await(started)
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("3 seconds")
        yield* Fiber.join(closing)
        assert.isTrue(yield* Ref.get(done))
        assert.strictEqual(yield* committedOffset("billing"), "1")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )
  })

  // -- lifecycle --------------------------------------------------------------------------------

  describe(`Consumer lifecycle (R2.5, R4.4) (${transaction})`, () => {
    it.effect("drives a PUBLISHED row to SUCCESS, and a DISPATCHING one too (consumer ahead of the ack)", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        yield* outboxRow(2, "DISPATCHING")
        yield* send(1)
        yield* send(2)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [1, 2])
        assert.strictEqual(yield* statusOf(1), "SUCCESS")
        assert.strictEqual(yield* statusOf(2), "SUCCESS")
        const history = yield* Effect.flatMap(InMemoryDatabase.InMemoryDatabase, (db) => db.history)
        const of2 = history.filter((c) => c.id === id(2)).map((c) => `${c.from}->${c.to}`)
        assert.deepStrictEqual(of2.slice(-2), ["DISPATCHING->UNDER_PROCESSING", "UNDER_PROCESSING->SUCCESS"])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("skips outbox work that is already terminal without running the handler", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        yield* Transition.startProcessing(id(1))
        yield* Transition.finishProcessing(id(1), "SUCCESS")
        yield* send(1)
        yield* send(2)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [2])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("reconciles a processed record whose SUCCESS is missing, without repeating the work", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        // an earlier run started, committed the work, then crashed before SUCCESS
        yield* Transition.startProcessing(id(1))
        yield* Inbox.processOnce({ consumer: "billing", identity: Inbox.eventIdentity(id(1)) }, Effect.void)
        const before = yield* Metric.value(Telemetry.consumerReconciledTotal)
        yield* send(1)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        assert.deepStrictEqual(yield* ns, [])
        assert.strictEqual(yield* statusOf(1), "SUCCESS")
        assert.strictEqual((yield* Metric.value(Telemetry.consumerReconciledTotal)).count, before.count + 1)
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a processed record whose row was still PUBLISHED is reconciled through UNDER_PROCESSING", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        yield* Inbox.processOnce({ consumer: "billing", identity: Inbox.eventIdentity(id(1)) }, Effect.void)
        yield* send(1)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "the row is SUCCESS",
          Effect.map(statusOf(1), (s) => s === "SUCCESS")
        )
        assert.deepStrictEqual(yield* ns, [])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("work that committed is never dead-lettered, even when the SUCCESS transition keeps failing", () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const { handler, ns } = yield* recording
        let workDone = false
        let existsCalls = 0
        // The transition fails for good (not retriable: a retriable one is waited for, see below),
        // and the "did the work commit?" check first meets a database that is down: it waits
        // for it instead of answering "no" (H2).
        yield* db.setFaultHook((operation) => {
          if (workDone && operation === "outbox.transition") {
            return new StoreError({ operation, reason: "constraint says no", kind: "permanent" })
          }
          if (operation === "inbox.exists" && existsCalls++ < 3) {
            return new StoreError({ operation, reason: "database went away", kind: "unavailable" })
          }
          return undefined
        })
        yield* outboxRow(1, "PUBLISHED")
        yield* send(1)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 3,
          handler: (m) => handler(m).pipe(Effect.tap(() => Effect.sync(() => (workDone = true))))
        })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        assert.deepStrictEqual(yield* ns, [1])
        assert.deepStrictEqual(yield* dltRecords, [])
        // the row waits for reconciliation on the next delivery
        assert.strictEqual(yield* statusOf(1), "UNDER_PROCESSING")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect(
      "a database outage far longer than the attempt budget dead-letters nothing; each record is processed once after it (H2)",
      () =>
        Effect.gen(function* () {
          const db = yield* InMemoryDatabase.InMemoryDatabase
          const { calls, handler } = yield* recording
          yield* outboxRow(1, "PUBLISHED")
          yield* send(1)
          yield* send(2)
          yield* send(3)
          let down = true
          yield* db.setFaultHook((operation) =>
            down ? new StoreError({ operation, reason: "connection refused", kind: "unavailable" }) : undefined
          )
          const before = (yield* Metric.value(Telemetry.consumerInfrastructureRetriesTotal)).count
          yield* Consumer.make({ ...baseOptions, maxAttempts: 2, handler })
          // Dozens of failed tries, 2 allowed: none counts.
          yield* eventually(
            "the consumer retried the infrastructure 6 times",
            Effect.map(Metric.value(Telemetry.consumerInfrastructureRetriesTotal), (m) => m.count - before >= 6)
          )
          assert.deepStrictEqual(yield* dltRecords, [])
          assert.strictEqual(yield* committedOffset("billing"), undefined)
          down = false
          yield* eventually(
            "offset 3 is committed",
            Effect.map(committedOffset("billing"), (o) => o === "3")
          )
          assert.deepStrictEqual(yield* dltRecords, [])
          assert.strictEqual((yield* db.processedKeys).size, 3)
          assert.strictEqual(yield* statusOf(1), "SUCCESS")
          // The handler's attempt number never moved: the outage was not the record's failure.
          assert.isTrue((yield* Ref.get(calls)).every((m) => m.attempt === 1))
        }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("infrastructure failures between a poison record's tries do not use up its attempts (H2)", () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const seen: Array<number> = []
        yield* send(1)
        // Every other inbox write fails on the database (before the handler runs).
        let writes = 0
        yield* db.setFaultHook((operation) =>
          operation === "inbox.record" && writes++ % 2 === 1
            ? new StoreError({ operation, reason: "connection reset", kind: "unavailable" })
            : undefined
        )
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 3,
          handler: (m) =>
            Effect.sync(() => seen.push(m.attempt)).pipe(
              Effect.andThen(Effect.fail(new HandlerFailed({ n: 1, retriable: true })))
            )
        })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        // Three tries of the handler, numbered 1-3; the failed writes between them did not count
        // (counted, they would have dead-lettered after tries 1 and 3).
        assert.deepStrictEqual(seen, [1, 2, 3])
        const letters = yield* dltRecords
        assert.strictEqual(letters.length, 1)
        const letter = DeadLetter.parse(letters[0]!)
        assert.strictEqual(letter._tag, "Some")
        if (letter._tag === "Some") assert.strictEqual(letter.value.attempts, 3)
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect(
      "a delivered record whose row is FAILURE is processed, counted and logged; the row stays FAILURE (C2)",
      () =>
        Effect.gen(function* () {
          const { handler, ns } = yield* recording
          yield* outboxRow(1, "DISPATCHING")
          yield* Transition.failDispatching([{ id: id(1), owner: "relay", reason: "publish timed out" }])
          assert.strictEqual(yield* statusOf(1), "FAILURE")
          yield* send(1)
          const before = yield* Metric.value(
            Metric.withAttributes(Telemetry.consumerAnomaliesTotal, { kind: "failure_row_delivered" })
          )
          yield* Consumer.make({ ...baseOptions, handler })
          yield* eventually(
            "offset 1 is committed",
            Effect.map(committedOffset("billing"), (o) => o === "1")
          )
          assert.deepStrictEqual(yield* ns, [1])
          assert.strictEqual(yield* statusOf(1), "FAILURE")
          const after = yield* Metric.value(
            Metric.withAttributes(Telemetry.consumerAnomaliesTotal, { kind: "failure_row_delivered" })
          )
          assert.strictEqual(after.count, before.count + 1)
        }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("lifecycle: false leaves rows alone (another group drives them)", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        yield* send(1)
        yield* Consumer.make({ ...baseOptions, handler, lifecycle: false })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        assert.deepStrictEqual(yield* ns, [1])
        assert.strictEqual(yield* statusOf(1), "PUBLISHED")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )
  })

  // -- dead letters -----------------------------------------------------------------------------

  describe(`Consumer dead letters (R5) (${transaction})`, () => {
    it.effect(
      "a poison record reaches the DLT after exactly N attempts while later records of its partition are processed",
      () =>
        Effect.gen(function* () {
          const attempts = yield* Ref.make(0)
          const { handler, ns } = yield* recording
          yield* send(1)
          yield* send(2, { key: "other" })
          yield* send(3)
          yield* Consumer.make({
            ...baseOptions,
            maxAttempts: 3,
            handler: (m) =>
              m.payload.n === 1
                ? Ref.update(attempts, (n) => n + 1).pipe(
                    Effect.andThen(Effect.fail(new HandlerFailed({ n: 1, retriable: true })))
                  )
                : handler(m)
          })
          yield* eventually(
            "offset 3 is committed",
            Effect.map(committedOffset("billing"), (o) => o === "3")
          )
          assert.strictEqual(yield* Ref.get(attempts), 3)
          assert.deepStrictEqual(yield* ns, [2, 3])
          const [dead] = yield* dltRecords
          assert.isDefined(dead)
          const letter = DeadLetter.parse(dead!)
          assert.strictEqual(letter._tag, "Some")
          if (letter._tag === "Some") {
            assert.strictEqual(letter.value.attempts, 3)
            assert.strictEqual(letter.value.errorClass, "HandlerFailed")
            assert.strictEqual(letter.value.originalTopic, "orders")
            assert.strictEqual(letter.value.originalPartition, 0)
            assert.strictEqual(letter.value.originalOffset, "0")
            assert.strictEqual(letter.value.eventId, id(1))
            assert.strictEqual(letter.value.consumerGroup, "billing")
          }
          // the original key, headers and payload travel unchanged
          assert.strictEqual(dead!.key, "k1")
          assert.strictEqual(dead!.headers["event-id"], id(1))
          assert.deepStrictEqual(dead!.value, jsonPayload({ n: 1 }))
          assert.strictEqual(dead!.headers[DeadLetter.headers.classification], "transient")
        }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("an undecodable payload is permanent: dead-lettered after one attempt", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1, { payload: { n: "not a number" } })
        yield* send(2)
        yield* Consumer.make({ ...baseOptions, handler })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [2])
        const [dead] = yield* dltRecords
        assert.strictEqual(dead!.headers[DeadLetter.headers.errorClass], "PayloadDecodeError")
        assert.strictEqual(dead!.headers[DeadLetter.headers.attempts], "1")
        assert.strictEqual(dead!.headers[DeadLetter.headers.classification], "permanent")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a transient failure that recovers within the budget is processed, not dead-lettered", () =>
      Effect.gen(function* () {
        const tries = yield* Ref.make(0)
        yield* send(1)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 5,
          handler: () =>
            Effect.flatMap(
              Ref.updateAndGet(tries, (n) => n + 1),
              (n) =>
                n < 3
                  ? Effect.fail(new StoreError({ operation: "x", reason: "timeout", kind: "unavailable" }))
                  : Effect.void
            )
        })
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        assert.strictEqual(yield* Ref.get(tries), 3)
        assert.deepStrictEqual(yield* dltRecords, [])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a handler defect is retried, then dead-lettered as HandlerDefectError; the consumer survives", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1)
        yield* send(2)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 2,
          handler: (m) => (m.payload.n === 1 ? Effect.die(new Error("kaboom")) : handler(m))
        })
        yield* eventually(
          "offset 2 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* ns, [2])
        const [dead] = yield* dltRecords
        assert.strictEqual(dead!.headers[DeadLetter.headers.errorClass], "HandlerDefectError")
        assert.strictEqual(dead!.headers[DeadLetter.headers.attempts], "2")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a custom classifier and DLT name are honoured", () =>
      Effect.gen(function* () {
        const attempts = yield* Ref.make(0)
        yield* send(1)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 5,
          classify: () => "permanent",
          deadLetterTopic: (topic) => `dead.${topic}`,
          handler: () =>
            Ref.update(attempts, (n) => n + 1).pipe(
              Effect.andThen(Effect.fail(new HandlerFailed({ n: 1, retriable: true })))
            )
        })
        const broker = yield* InMemoryBroker.InMemoryBroker
        yield* eventually(
          "the DLT has the record",
          Effect.map(broker.records("dead.orders"), (r) => r.length === 1)
        )
        assert.strictEqual(yield* Ref.get(attempts), 1)
      }).pipe(Effect.scoped, Effect.provide(makeLayer({ orders: 1, "dead.orders": 1 })))
    )

    it.effect("a dead-lettered outbox row ends PUSHED_FAILURE", () =>
      Effect.gen(function* () {
        yield* outboxRow(1, "PUBLISHED")
        yield* send(1, { payload: { n: "bad" } })
        yield* Consumer.make({ ...baseOptions, handler: () => Effect.void })
        yield* eventually(
          "the row is PUSHED_FAILURE",
          Effect.map(statusOf(1), (s) => s === "PUSHED_FAILURE")
        )
        assert.strictEqual((yield* dltRecords).length, 1)
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a missing DLT topic stops the consumer with DeadLetterPublishError and commits nothing past it", () =>
      Effect.gen(function* () {
        yield* send(1, { payload: { n: "bad" } })
        const consumer = yield* Consumer.make({ ...baseOptions, handler: () => Effect.void })
        const fiber = yield* Effect.forkChild(consumer.await)
        yield* eventually(
          "the consumer failed",
          Effect.map(Fiber.await(fiber).pipe(Effect.timeoutOption(0)), (o) => o._tag === "Some")
        )
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const error = exit.cause.reasons.find((r) => r._tag === "Fail")
          assert.strictEqual(error?._tag === "Fail" ? error.error._tag : undefined, "DeadLetterPublishError")
        }
        assert.strictEqual(yield* committedOffset("billing"), undefined)
      }).pipe(Effect.scoped, Effect.provide(makeLayer({ orders: 1 })))
    )
  })

  // -- parking ----------------------------------------------------------------------------------

  describe(`Consumer parking (${transaction})`, () => {
    it.effect(
      "parks later records of a dead-lettered key, lets other keys flow, holds the offset, and release replays in order",
      () =>
        Effect.gen(function* () {
          const fixed = yield* Ref.make(false)
          const { handler, ns } = yield* recording
          yield* send(1, { key: "A" }) // offset 0: poison
          yield* send(2, { key: "A" }) // offset 1: parked behind it
          yield* send(3, { key: "B" }) // offset 2: flows
          yield* send(4, { key: "A" }) // offset 3: parked
          const consumer = yield* Consumer.make({
            ...baseOptions,
            parking: true,
            maxAttempts: 1,
            handler: (m) =>
              Effect.flatMap(Ref.get(fixed), (ok) =>
                m.payload.n === 1 && !ok ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m)
              )
          })
          yield* eventually(
            "B is processed",
            Effect.map(ns, (all) => all.includes(3))
          )
          yield* eventually(
            "A is parked",
            Effect.map(consumer.parked, (p) => p.length === 1 && p[0]!.offsets.length === 2)
          )
          assert.deepStrictEqual(yield* ns, [3])
          const [parked] = yield* consumer.parked
          assert.deepStrictEqual(parked, { topic: "orders", partition: 0, key: "A", offsets: ["1", "3"] })
          // offset 1 is unfinished: the committed offset may not pass it, although 2 is done
          assert.strictEqual(yield* committedOffset("billing"), "1")
          const released = yield* consumer.release({ topic: "orders", partition: 0, key: "A" })
          assert.strictEqual(released, 2)
          assert.deepStrictEqual(yield* ns, [3, 2, 4])
          assert.deepStrictEqual(yield* consumer.parked, [])
          assert.strictEqual(yield* committedOffset("billing"), "4")
        }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a released record that fails again parks the rest of its key again, in order", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1, { key: "A" })
        yield* send(2, { key: "A" })
        yield* send(3, { key: "A" })
        const consumer = yield* Consumer.make({
          ...baseOptions,
          parking: true,
          maxAttempts: 1,
          handler: (m) =>
            m.payload.n <= 2 ? Effect.fail(new HandlerFailed({ n: m.payload.n, retriable: false })) : handler(m)
        })
        yield* eventually(
          "A is parked",
          Effect.map(consumer.parked, (p) => p.length === 1 && p[0]!.offsets.length === 2)
        )
        yield* consumer.release({ topic: "orders", partition: 0, key: "A" })
        assert.deepStrictEqual(yield* consumer.parked, [{ topic: "orders", partition: 0, key: "A", offsets: ["2"] }])
        assert.deepStrictEqual(yield* ns, [])
        assert.strictEqual((yield* dltRecords).length, 2)
        assert.strictEqual(yield* committedOffset("billing"), "2")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )
    it.effect("a partition that moves away and comes back forgets its stale parking and keeps committing", () =>
      Effect.gen(function* () {
        const { handler, ns } = yield* recording
        yield* send(1, { key: "A", partition: 1 }) // p1@0: poison
        yield* send(2, { key: "A", partition: 1 }) // p1@1: parked behind it
        yield* send(3, { key: "B", partition: 1 }) // p1@2: flows
        const consumer = yield* Consumer.make({
          ...baseOptions,
          parking: true,
          maxAttempts: 1,
          handler: (m) => (m.payload.n === 1 ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m))
        })
        yield* eventually(
          "A is parked and B done",
          Effect.map(ns, (all) => all.includes(3))
        )
        assert.strictEqual(yield* committedOffset("billing", 1), "1")
        // a second member joins (partition 1 moves to it) and leaves without doing anything
        const source = yield* ConsumerSource
        const visitor = yield* Scope.make()
        yield* source.subscribe({ groupId: "billing", topics: ["orders"] }).pipe(Scope.provide(visitor))
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow
        yield* Scope.close(visitor, Exit.void)
        // back at the committed offset 1: the parking is gone with the partition, record 2 runs
        yield* eventually(
          "offset 3 is committed",
          Effect.map(committedOffset("billing", 1), (o) => o === "3")
        )
        assert.deepStrictEqual(yield* ns, [3, 2])
        assert.deepStrictEqual(yield* consumer.parked, [])
      }).pipe(Effect.scoped, Effect.provide(makeLayer({ orders: 2, "orders.DLT": 1 })))
    )
  })

  // -- replay -----------------------------------------------------------------------------------

  describe(`DeadLetter.replay (R5.3) (${transaction})`, () => {
    it.effect("republishes selected dead letters with the same event id; the consumer processes them once", () =>
      Effect.gen(function* () {
        const broken = yield* Ref.make(true)
        const { calls, handler, ns } = yield* recording
        yield* send(1)
        yield* send(2)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 1,
          handler: (m) =>
            Effect.flatMap(Ref.get(broken), (b) =>
              b ? Effect.fail(new HandlerFailed({ n: m.payload.n, retriable: false })) : handler(m)
            )
        })
        yield* eventually(
          "both are dead-lettered",
          Effect.map(dltRecords, (r) => r.length === 2)
        )
        yield* Ref.set(broken, false)

        const result = yield* DeadLetter.replay({ from: "orders.DLT", filter: (d) => d.eventId === id(1) })
        assert.strictEqual(result.replayed.length, 1)
        assert.strictEqual(result.skipped, 1)
        assert.deepStrictEqual(result.failed, [])
        const broker = yield* InMemoryBroker.InMemoryBroker
        const republished = (yield* broker.log("orders", 0))[2]!
        assert.strictEqual(republished.headers["event-id"], id(1))
        assert.strictEqual(republished.headers[DeadLetter.headers.replayAttempt], "1")
        assert.isUndefined(republished.headers[DeadLetter.headers.errorClass])
        assert.strictEqual(republished.key, "k1")
        yield* eventually(
          "the replayed record is processed",
          Effect.map(ns, (all) => all.length === 1)
        )
        assert.strictEqual((yield* Ref.get(calls))[0]!.idempotencyKey, id(1))

        // replaying again publishes again, and the consumer deduplicates by event id
        yield* DeadLetter.replay({ from: "orders.DLT", filter: (d) => d.eventId === id(1) })
        yield* eventually(
          "offset 4 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "4")
        )
        assert.deepStrictEqual(yield* ns, [1])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("a replayed dead letter of a PUSHED_FAILURE row is processed again; the row stays terminal", () =>
      Effect.gen(function* () {
        const broken = yield* Ref.make(true)
        const { handler, ns } = yield* recording
        yield* outboxRow(1, "PUBLISHED")
        yield* send(1)
        yield* Consumer.make({
          ...baseOptions,
          maxAttempts: 1,
          handler: (m) =>
            Effect.flatMap(Ref.get(broken), (b) =>
              b ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m)
            )
        })
        yield* eventually(
          "the row is PUSHED_FAILURE",
          Effect.map(statusOf(1), (s) => s === "PUSHED_FAILURE")
        )
        yield* Ref.set(broken, false)
        yield* DeadLetter.replay({ from: "orders.DLT" })
        yield* eventually(
          "the replay is processed",
          Effect.map(ns, (all) => all.length === 1)
        )
        assert.strictEqual(yield* statusOf(1), "PUSHED_FAILURE")
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
    )

    it.effect("to: sends to another topic; a missing DLT fails with a typed error", () =>
      Effect.gen(function* () {
        yield* send(1, { payload: { n: "bad" } })
        yield* Consumer.make({ ...baseOptions, handler: () => Effect.void })
        yield* eventually(
          "the DLT has it",
          Effect.map(dltRecords, (r) => r.length === 1)
        )
        const result = yield* DeadLetter.replay({ from: "orders.DLT", to: "orders.retry" })
        assert.strictEqual(result.replayed.length, 1)
        const broker = yield* InMemoryBroker.InMemoryBroker
        assert.strictEqual((yield* broker.records("orders.retry")).length, 1)
        const missing = yield* Effect.flip(DeadLetter.replay({ from: "nope.DLT" }))
        assert.strictEqual(missing._tag, "ConsumerSourceError")
      }).pipe(Effect.scoped, Effect.provide(makeLayer({ orders: 1, "orders.DLT": 1, "orders.retry": 1 })))
    )
  })
}

describe("Consumer, transaction per batch", () => {
  const perBatch = { ...commonOptions, transaction: "per-batch" } as const

  it.effect("a clean batch commits in ONE transaction, with one inbox record per record", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const { handler, ns } = yield* recording
      for (const n of [1, 2, 3, 4, 5]) yield* send(n)
      const before = yield* db.transactions
      yield* Consumer.make({ ...perBatch, handler })
      yield* eventually(
        "offset 5 is committed",
        Effect.map(committedOffset("billing"), (o) => o === "5")
      )
      assert.deepStrictEqual(yield* ns, [1, 2, 3, 4, 5])
      assert.strictEqual((yield* db.transactions).commits - before.commits, 1)
      assert.strictEqual((yield* db.processedKeys).size, 5)
    }).pipe(Effect.scoped, Effect.provide(makeLayer()))
  )

  it.effect("a failing record commits the ones before it, is retried on its own (attempt 2), then the rest go on", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const calls = yield* Ref.make<ReadonlyArray<string>>([])
      for (const n of [1, 2, 3, 4, 5]) yield* send(n)
      yield* Consumer.make({
        ...perBatch,
        handler: (m) =>
          Effect.gen(function* () {
            yield* Ref.update(calls, (all) => [...all, `${m.payload.n}#${m.attempt}`])
            if (m.payload.n === 3 && m.attempt === 1) return yield* new HandlerFailed({ n: 3, retriable: true })
          })
      })
      yield* eventually(
        "offset 5 is committed",
        Effect.map(committedOffset("billing"), (o) => o === "5")
      )
      // 1 and 2 ran in the rolled-back try and again in their own batch; 3 retried alone; 4, 5 after it
      assert.deepStrictEqual(yield* Ref.get(calls), ["1#1", "2#1", "3#1", "1#1", "2#1", "3#2", "4#1", "5#1"])
      assert.strictEqual((yield* db.processedKeys).size, 5)
      assert.deepStrictEqual(yield* db.transactions, { commits: 3, rollbacks: 1 })
    }).pipe(Effect.scoped, Effect.provide(makeLayer()))
  )

  it.effect("local outbox rows are looked up once per batch and driven to SUCCESS", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const { handler, ns } = yield* recording
      for (const n of [1, 2, 3]) {
        yield* outboxRow(n, "PUBLISHED")
        yield* send(n)
      }
      yield* send(4) // not a local row
      yield* db.failNext({ count: 1, operations: ["outbox.get"], retriable: false })
      yield* Consumer.make({ ...perBatch, handler })
      yield* eventually(
        "offset 4 is committed",
        Effect.map(committedOffset("billing"), (o) => o === "4")
      )
      assert.deepStrictEqual(yield* ns, [1, 2, 3, 4])
      for (const n of [1, 2, 3]) assert.strictEqual(yield* statusOf(n), "SUCCESS")
    }).pipe(Effect.scoped, Effect.provide(makeLayer()))
  )
})

describe("Consumer.defaultClassifier", () => {
  it("an error's kind decides; decode and validation errors are permanent; retriable flags decide; unknown errors are transient", () => {
    assert.strictEqual(
      Consumer.defaultClassifier(
        new Consumer.PayloadDecodeError({ topic: "t", partition: 0, offset: "0", reason: "x" })
      ),
      "permanent"
    )
    const store = (kind: FailureKind) => new StoreError({ operation: "q", reason: kind, kind })
    assert.strictEqual(Consumer.defaultClassifier(store("transient")), "transient")
    assert.strictEqual(Consumer.defaultClassifier(store("unavailable")), "transient")
    assert.strictEqual(Consumer.defaultClassifier(store("permanent")), "permanent")
    // Publish errors carry their kind too: a handler that publishes is classified by it.
    assert.strictEqual(
      Consumer.defaultClassifier(new PermanentPublishError({ topic: "t", reason: "too large" })),
      "permanent"
    )
    assert.strictEqual(
      Consumer.defaultClassifier(new RetriablePublishError({ topic: "t", reason: "timeout" })),
      "transient"
    )
    // Your own error with a kind is read the same way, before any retriable flag.
    assert.strictEqual(Consumer.defaultClassifier({ kind: "permanent", retriable: true }), "permanent")
    assert.strictEqual(Consumer.defaultClassifier({ kind: "later", retriable: false }), "permanent")
    assert.strictEqual(Consumer.defaultClassifier(new HandlerFailed({ n: 1, retriable: false })), "permanent")
    assert.strictEqual(Consumer.defaultClassifier({ _tag: "OutboxValidationError" }), "permanent")
    assert.strictEqual(Consumer.defaultClassifier(new Error("?")), "transient")
  })
})

describe("Consumer.defaultIsInfrastructure", () => {
  it("errors of kind unavailable, and SQL errors the driver marks retryable, are the infrastructure's (H2)", () => {
    const sqlError = (reason: SqlErrorReason) => new SqlError({ reason })
    const store = (kind: FailureKind) => new StoreError({ operation: "q", reason: kind, kind })
    assert.isTrue(Consumer.defaultIsInfrastructure(store("unavailable")))
    assert.isFalse(Consumer.defaultIsInfrastructure(store("transient")))
    assert.isFalse(Consumer.defaultIsInfrastructure(store("permanent")))
    assert.isTrue(Consumer.defaultIsInfrastructure(new BrokerUnavailableError({ topic: "t", reason: "no leader" })))
    assert.isTrue(Consumer.defaultIsInfrastructure({ _tag: "MyOwn", kind: "unavailable" }))
    assert.isTrue(Consumer.defaultIsInfrastructure(sqlError(new ConnectionError({ cause: new Error("ECONNREFUSED") }))))
    assert.isTrue(Consumer.defaultIsInfrastructure(sqlError(new DeadlockError({ cause: { code: "40P01" } }))))
    // A SQLSTATE the driver files as unknown is the adapter's to judge (PgErrors.isInfrastructure),
    // never parsed here.
    const shutdown = sqlError(new UnknownError({ cause: { code: "57P01" }, message: "Query failed" }))
    assert.isFalse(Consumer.defaultIsInfrastructure(shutdown))
    assert.isFalse(Consumer.defaultIsInfrastructure(new HandlerFailed({ n: 1, retriable: true })))
    assert.isFalse(
      Consumer.defaultIsInfrastructure(
        new Consumer.PayloadDecodeError({ topic: "t", partition: 0, offset: "0", reason: "x" })
      )
    )
  })
})

// -- rebalances (M2, M3) --------------------------------------------------------------------------

describe("Consumer rebalances (M2, M3)", () => {
  const smallBatches = (topics: Record<string, number>) =>
    Layer.mergeAll(
      Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)),
      InMemoryTopicReader.layer.pipe(Layer.provideMerge(InMemoryBroker.layer({ topics, maxBatchSize: 2 })))
    )

  it.effect("a slow partition does not stall the others", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const handled = new Set<number>()
      // Partition 0 is stuck on its first record; partition 1 has far more batches than the
      // buffers hold (2 per partition, 2 records per batch).
      for (let n = 1; n <= 10; n++) yield* send(n, { partition: 0 })
      for (let n = 101; n <= 140; n++) yield* send(n, { partition: 1 })
      yield* Consumer.make({
        ...commonOptions,
        handler: (m) =>
          Effect.andThen(
            m.record.partition === 0 ? Deferred.await(gate) : Effect.void,
            Effect.sync(() => handled.add(m.payload.n))
          )
      })
      yield* eventually(
        "partition 1 is committed to its end while partition 0 waits",
        Effect.map(committedOffset("billing", 1), (o) => o === "40")
      )
      assert.strictEqual(handled.size, 40)
      assert.strictEqual(yield* committedOffset("billing", 0), undefined)
      yield* Deferred.succeed(gate, undefined)
      yield* eventually(
        "partition 0 catches up",
        Effect.map(committedOffset("billing", 0), (o) => o === "10")
      )
      assert.strictEqual(handled.size, 50)
    }).pipe(Effect.scoped, Effect.provide(smallBatches({ orders: 2, "orders.DLT": 1 })))
  )

  it.effect("a revoked partition's queued batches are not handled", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const gateA = yield* Deferred.make<void>()
      const gateB = yield* Deferred.make<void>()
      const startsA: Array<number> = []
      const startsB: Array<number> = []
      for (let n = 1; n <= 10; n++) yield* send(n)
      const revokedBefore = (yield* Metric.value(Telemetry.consumerRevokedRecordsTotal)).count
      // Member A is stuck on record 1 with batches queued behind it.
      yield* Consumer.make({
        ...commonOptions,
        handler: (m) =>
          Effect.andThen(
            Effect.sync(() => startsA.push(m.payload.n)),
            m.payload.n === 1 ? Deferred.await(gateA) : Effect.void
          )
      })
      yield* eventually(
        "A started record 1",
        Effect.sync(() => startsA.length === 1)
      )
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      // Member B joins and the rebalance hands it the partition; B waits until A is done.
      yield* Consumer.make({
        ...commonOptions,
        handler: (m) =>
          Effect.andThen(
            Effect.sync(() => startsB.push(m.payload.n)),
            Deferred.await(gateB)
          )
      })
      yield* broker.rebalance("billing")
      yield* Deferred.succeed(gateA, undefined)
      yield* eventually(
        "A dropped the rest of its batches",
        Effect.map(Metric.value(Telemetry.consumerRevokedRecordsTotal), (m) => m.count - revokedBefore >= 5)
      )
      yield* Deferred.succeed(gateB, undefined)
      yield* eventually(
        "B committed the partition's end",
        Effect.map(committedOffset("billing"), (o) => o === "10")
      )
      // A ran only the record in flight at the revocation; every other record started once, on B.
      assert.deepStrictEqual(startsA, [1])
      for (let n = 2; n <= 10; n++) assert.strictEqual(startsB.filter((x) => x === n).length, 1, `record ${n}`)
      assert.isAtMost(startsB.filter((x) => x === 1).length, 1)
    }).pipe(Effect.scoped, Effect.provide(smallBatches({ orders: 1, "orders.DLT": 1 })))
  )
})

// -- replay identity (M8) ------------------------------------------------------------------------

describe("DeadLetter.replay keeps the original identity (M8)", () => {
  it.effect(
    "a record without an event id gets none on replay; an offset-identity group sees the replay as the original",
    () =>
      Effect.gen(function* () {
        const broken = yield* Ref.make(true)
        const billing = yield* recording
        const audit = yield* recording
        yield* send(1, { eventId: false })
        // "billing" handles the original under its offset identity; "audit" dead-letters it.
        yield* Consumer.make({ ...commonOptions, identity: "offset", handler: billing.handler })
        yield* Consumer.make({
          ...commonOptions,
          groupId: "audit",
          lifecycle: false,
          maxAttempts: 1,
          handler: (m) =>
            Effect.flatMap(Ref.get(broken), (b) =>
              b ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : audit.handler(m)
            )
        })
        yield* eventually(
          "the DLT has it",
          Effect.map(dltRecords, (r) => r.length === 1)
        )
        const [letter] = yield* dltRecords
        assert.isUndefined(letter!.headers["event-id"], "no event id invented for the dead letter")
        yield* Ref.set(broken, false)

        yield* DeadLetter.replay({ from: "orders.DLT" })
        const broker = yield* InMemoryBroker.InMemoryBroker
        const replayed = (yield* broker.log("orders", 0))[1]!
        assert.isUndefined(replayed.headers["event-id"], "no event id invented for the replay")
        assert.strictEqual(replayed.headers[ORIGINAL_RECORD_HEADER], "orders/0/0")
        yield* eventually(
          "audit handled the replay",
          Effect.map(audit.ns, (all) => all.length === 1)
        )
        assert.strictEqual((yield* Ref.get(audit.calls))[0]!.idempotencyKey, "offset:orders/0/0")
        yield* eventually(
          "billing committed past the replay",
          Effect.map(committedOffset("billing"), (o) => o === "2")
        )
        assert.deepStrictEqual(yield* billing.ns, [1], "billing did not handle the replay again")

        // A second replay keeps the same identity: neither group handles it again.
        yield* DeadLetter.replay({ from: "orders.DLT" })
        yield* eventually(
          "both committed past the second replay",
          Effect.map(
            Effect.all([committedOffset("billing"), committedOffset("audit")]),
            ([b, a]) => b === "3" && a === "3"
          )
        )
        assert.deepStrictEqual(yield* billing.ns, [1])
        assert.deepStrictEqual(yield* audit.ns, [1])
        const db = yield* InMemoryDatabase.InMemoryDatabase
        assert.deepStrictEqual([...(yield* db.processedKeys)].sort(), [
          InMemoryDatabase.processedKey("audit", "offset:orders/0/0"),
          InMemoryDatabase.processedKey("billing", "offset:orders/0/0")
        ])
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))
  )

  it("Inbox.identityOf honours outbox-original-record and ignores a malformed one", () => {
    const at = { topic: "orders", partition: 0, offset: "7" }
    assert.strictEqual(
      Inbox.identityOf({ ...at, headers: { [ORIGINAL_RECORD_HEADER]: "orders/2/5" } }, "offset"),
      "offset:orders/2/5"
    )
    assert.strictEqual(
      Inbox.identityOf({ ...at, headers: { [ORIGINAL_RECORD_HEADER]: "garbage" } }, "offset"),
      "offset:orders/0/7"
    )
    assert.strictEqual(
      Inbox.identityOf({ ...at, headers: { "event-id": "e1", [ORIGINAL_RECORD_HEADER]: "orders/2/5" } }),
      "event:e1"
    )
  })
})

// -- durable parking -----------------------------------------------------------------------------

describe("Consumer durable parking", () => {
  for (const transaction of ["per-record", "per-batch"] as const) {
    it.effect(
      `parked keys survive a restart, do not hold the commit, and a release runs the head first (${transaction})`,
      () =>
        Effect.gen(function* () {
          const broken = yield* Ref.make(true)
          const { handler, ns } = yield* recording
          const options = {
            ...commonOptions,
            transaction,
            parking: true,
            maxAttempts: 1,
            handler: (m: Consumer.Message<Order>) =>
              Effect.flatMap(Ref.get(broken), (b) =>
                b && m.payload.n === 1 ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m)
              )
          }
          yield* send(1, { key: "k" })
          yield* send(2, { key: "k" })
          yield* send(3, { key: "other" })
          yield* send(4, { key: "k" })
          const first = yield* Scope.make()
          const consumer = yield* Consumer.make(options).pipe(Scope.provide(first))
          // Parked records are finished for the commit: their positions are durable.
          yield* eventually(
            "offset 4 is committed",
            Effect.map(committedOffset("billing"), (o) => o === "4")
          )
          assert.deepStrictEqual(yield* ns, [3])
          assert.deepStrictEqual(yield* consumer.parked, [
            { topic: "orders", partition: 0, key: "k", offsets: ["0", "1", "3"] }
          ])
          yield* closeScope(first)

          // A restart: the key is still parked, and a new record of it parks behind the others.
          yield* Ref.set(broken, false)
          const restarted = yield* Consumer.make(options)
          yield* send(5, { key: "k" })
          yield* eventually(
            "offset 5 is committed",
            Effect.map(committedOffset("billing"), (o) => o === "5")
          )
          assert.deepStrictEqual(yield* ns, [3])
          assert.deepStrictEqual(yield* restarted.parked, [
            { topic: "orders", partition: 0, key: "k", offsets: ["0", "1", "3", "4"] }
          ])

          // Release: the records are re-read by position, the dead-lettered head first.
          assert.strictEqual(yield* restarted.release({ topic: "orders", partition: 0, key: "k" }), 4)
          assert.deepStrictEqual(yield* ns, [3, 1, 2, 4, 5])
          assert.deepStrictEqual(yield* restarted.parked, [])
          yield* send(6, { key: "k" })
          yield* eventually(
            "record 6 runs at once",
            Effect.map(ns, (all) => all.length === 6)
          )
        }).pipe(Effect.scoped, Effect.provide(Layer.merge(makeLayer(), InMemoryParkedStore.layer())))
    )
  }

  it.effect("a release requested through the store (the CLI's way) runs on the member that owns the partition", () =>
    Effect.gen(function* () {
      const broken = yield* Ref.make(true)
      const { handler, ns } = yield* recording
      yield* send(1, { key: "k" })
      yield* send(2, { key: "k" })
      yield* Consumer.make({
        ...commonOptions,
        parking: true,
        maxAttempts: 1,
        parkedReleaseInterval: "1 second",
        handler: (m: Consumer.Message<Order>) =>
          Effect.flatMap(Ref.get(broken), (b) =>
            b && m.payload.n === 1 ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m)
          )
      })
      yield* eventually(
        "offset 2 is committed",
        Effect.map(committedOffset("billing"), (o) => o === "2")
      )
      yield* Ref.set(broken, false)
      const store = yield* ParkedStore
      yield* store.requestRelease({ consumer: "billing", topic: "orders", partition: 0, key: "k" })
      yield* eventually(
        "the key's records ran, head first",
        Effect.map(ns, (all) => all.length === 2)
      )
      assert.deepStrictEqual(yield* ns, [1, 2])
      yield* eventually(
        "the request is cleared",
        Effect.map(store.releaseRequests("billing"), (r) => r.length === 0)
      )
      assert.deepStrictEqual(yield* store.list({ consumer: "billing" }), [])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(makeLayer(), InMemoryParkedStore.layer())))
  )

  it.effect("a release reads only the parked positions, and the partition's worker goes on while it reads", () =>
    Effect.gen(function* () {
      const broken = yield* Ref.make(true)
      const { handler, ns } = yield* recording
      const reads = yield* Ref.make<ReadonlyArray<PositionedRead>>([])
      const gate = yield* Deferred.make<void>()
      const inMemory = yield* TopicReader
      // The reader in front of the broker: a positioned read waits for the gate; a whole-topic
      // read fails the test.
      const reader = TopicReader.of({
        read: () => Stream.die("a release read the whole topic"),
        readAt: (request) =>
          Stream.unwrap(
            Ref.update(reads, (all) => [...all, request]).pipe(
              Effect.andThen(Deferred.await(gate)),
              Effect.as(inMemory.readAt!(request))
            )
          )
      })
      yield* send(1, { key: "k" })
      yield* send(2, { key: "k" })
      const consumer = yield* Consumer.make({
        ...commonOptions,
        parking: true,
        maxAttempts: 1,
        handler: (m: Consumer.Message<Order>) =>
          Effect.flatMap(Ref.get(broken), (b) =>
            b && m.payload.n === 1 ? Effect.fail(new HandlerFailed({ n: 1, retriable: false })) : handler(m)
          )
      }).pipe(Effect.provideService(TopicReader, reader))
      yield* eventually(
        "offset 2 is committed",
        Effect.map(committedOffset("billing"), (o) => o === "2")
      )
      yield* Ref.set(broken, false)

      const release = yield* Effect.forkChild(consumer.release({ topic: "orders", partition: 0, key: "k" }))
      yield* eventually(
        "the release reads",
        Effect.map(Ref.get(reads), (all) => all.length === 1)
      )
      assert.deepStrictEqual(yield* Ref.get(reads), [{ topic: "orders", partition: 0, offsets: ["0", "1"] }])
      // The read has not finished: a record of another key on the same partition still runs.
      yield* send(3, { key: "other" })
      yield* eventually(
        "record 3 ran during the read",
        Effect.map(ns, (all) => all.includes(3))
      )
      yield* Deferred.succeed(gate, undefined)
      yield* eventually(
        "the release finished",
        Effect.sync(() => release.pollUnsafe() !== undefined)
      )
      assert.strictEqual(yield* Fiber.join(release), 2)
      assert.deepStrictEqual(yield* ns, [3, 1, 2])
      assert.deepStrictEqual(yield* consumer.parked, [])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(makeLayer(), InMemoryParkedStore.layer())))
  )

  it.effect(
    "the oldest parked record's age is a gauge, and an ERROR names the key once it passes 80% of retention",
    () =>
      Effect.gen(function* () {
        const errors = yield* Ref.make<ReadonlyArray<string>>([])
        const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
          if (logLevel === "Error") Effect.runSync(Ref.update(errors, (all) => [...all, String(message)]))
        })
        const inMemory = yield* BrokerAdmin
        // The topic keeps records for 100 s.
        const admin = BrokerAdmin.of({ ...inMemory, retentionMillis: () => Effect.succeed(Option.some(100_000)) })
        yield* send(1, { key: "k" })
        yield* Consumer.make({
          ...commonOptions,
          parking: true,
          maxAttempts: 1,
          parkedReleaseInterval: "5 seconds",
          handler: () => Effect.fail(new HandlerFailed({ n: 1, retriable: false }))
        }).pipe(Effect.provideService(BrokerAdmin, admin), Effect.provide(Logger.layer([logger])))
        yield* eventually(
          "offset 1 is committed",
          Effect.map(committedOffset("billing"), (o) => o === "1")
        )
        const age = Effect.map(
          Metric.value(Metric.withAttributes(Telemetry.consumerParkedOldestAge, { group: "billing", topic: "orders" })),
          (state) => state.value
        )
        for (let i = 0; i < 14; i++) yield* TestClock.adjust("5 seconds")
        assert.isAtLeast(yield* age, 70)
        assert.isBelow(yield* age, 80)
        assert.deepStrictEqual(yield* Ref.get(errors), [], "70 s of 100 s: not yet")
        for (let i = 0; i < 3; i++) yield* TestClock.adjust("5 seconds")
        assert.isAtLeast(yield* age, 80)
        const [error] = yield* Ref.get(errors)
        assert.isDefined(error, "an ERROR past 80% of the retention")
        assert.include(error, "parked key k of orders/0 (group billing)")
        assert.include(error, "the topic keeps records 100 s")
        yield* TestClock.adjust("15 seconds")
        assert.strictEqual((yield* Ref.get(errors)).length, 1, "reported once, not on every sample")
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(makeLayer(), InMemoryParkedStore.layer())))
  )
})
