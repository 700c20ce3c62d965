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
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import * as Consumer from "../src/Consumer.ts"
import * as Inbox from "../src/Inbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import { jsonPayload } from "../src/OutboxMessage.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Telemetry from "../src/Telemetry.ts"
import { committedOffset, eventually } from "./support/consumerTest.ts"

// -- fixtures ---------------------------------------------------------------------------------

const Order = Schema.Struct({ n: Schema.Number })
type Order = typeof Order.Type

const id = (n: number) => `0190a0a0-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId

class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", {
  n: Schema.Number,
  retriable: Schema.Boolean
}) {}

const layer = (options: { readonly partitions?: number; readonly maxBatchSize?: number } = {}) =>
  Layer.mergeAll(
    Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)),
    InMemoryTopicReader.layer.pipe(
      Layer.provideMerge(
        InMemoryBroker.layer({
          topics: { orders: options.partitions ?? 1, "orders.DLT": 1 },
          ...(options.maxBatchSize === undefined ? {} : { maxBatchSize: options.maxBatchSize })
        })
      )
    )
  )

const send = (n: number, key: string, partition = 0) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const [outcome] = yield* publisher.publish([
      { id: id(n), topic: "orders", key, partition, headers: { "event-id": id(n) }, payload: jsonPayload({ n }) }
    ])
    assert.strictEqual(outcome!._tag, "Success")
  })

const settle = Effect.gen(function* () {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/**
 * Watches handlers: how many run at once (overall and per key), and the order each key's
 * records started in.
 */
const makeWatch = () => {
  let running = 0
  const runningByKey = new Map<string, number>()
  const watch = {
    maxRunning: 0,
    maxPerKey: 0,
    started: new Map<string, Array<number>>(),
    finished: [] as Array<number>,
    around: <A, E, R>(message: Consumer.Message<Order>, work: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const key = message.key ?? "null"
        running++
        runningByKey.set(key, (runningByKey.get(key) ?? 0) + 1)
        watch.maxRunning = Math.max(watch.maxRunning, running)
        watch.maxPerKey = Math.max(watch.maxPerKey, runningByKey.get(key)!)
        watch.started.set(key, [...(watch.started.get(key) ?? []), message.payload.n])
        const result = yield* work
        watch.finished.push(message.payload.n)
        return result
      }).pipe(
        Effect.ensuring(
          Effect.sync(() => {
            running--
            runningByKey.set(key(message), runningByKey.get(key(message))! - 1)
          })
        )
      )
  }
  return watch
}
const key = (message: Consumer.Message<Order>) => message.key ?? "null"

const ascending = (values: ReadonlyArray<number>) => values.every((v, i) => i === 0 || values[i - 1]! < v)

const options = (perPartition: number, extra: { readonly maxHeld?: number } = {}) =>
  ({
    groupId: "billing",
    topics: ["orders"],
    schema: Order,
    fromBeginning: true,
    retrySchedule: Schedule.spaced("1 second"),
    concurrency: { by: "key", perPartition, ...extra }
  }) as const

// -- behaviour --------------------------------------------------------------------------------

for (const transaction of ["per-record", "per-batch"] as const) {
  describe(`Consumer key concurrency (${transaction})`, () => {
    it.effect("runs up to perPartition keys at once, one handler per key, each key in offset order", () =>
      Effect.gen(function* () {
        const watch = makeWatch()
        for (let n = 0; n < 60; n++) yield* send(n, `k${n % 6}`)
        yield* Consumer.make({
          ...options(4),
          transaction,
          handler: (m) => watch.around(m, Effect.sleep("1 second"))
        })
        yield* eventually(
          "the partition is committed to its end",
          Effect.map(committedOffset("billing"), (o) => o === "60"),
          "250 millis"
        )
        assert.strictEqual(watch.finished.length, 60)
        assert.strictEqual(watch.maxPerKey, 1)
        assert.strictEqual(watch.maxRunning, 4)
        for (const [k, ns] of watch.started) assert.isTrue(ascending(ns), `key ${k} ran out of order: ${ns}`)
      }).pipe(Effect.scoped, Effect.provide(layer({ maxBatchSize: 20 })))
    )

    it.effect("a slow key holds back only its own successors; the commit stops at its record", () =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        const watch = makeWatch()
        yield* send(0, "slow")
        yield* send(1, "slow")
        for (let n = 2; n < 12; n++) yield* send(n, `k${n}`)
        yield* Consumer.make({
          ...options(3),
          transaction,
          handler: (m) => watch.around(m, m.payload.n === 0 ? Deferred.await(gate) : Effect.void)
        })
        yield* eventually(
          "every other key finished",
          Effect.sync(() => watch.finished.length === 10)
        )
        assert.deepStrictEqual(watch.started.get("slow"), [0])
        yield* settle
        // The lowest unfinished offset is 0: nothing is committed past it.
        assert.strictEqual(yield* committedOffset("billing"), "0")
        yield* Deferred.succeed(gate, undefined)
        yield* eventually(
          "the partition is committed to its end",
          Effect.map(committedOffset("billing"), (o) => o === "12")
        )
        assert.deepStrictEqual(watch.started.get("slow"), [0, 1])
      }).pipe(Effect.scoped, Effect.provide(layer()))
    )

    it.effect("a transient failure retries with back-off on its key while other keys go on", () =>
      Effect.gen(function* () {
        const watch = makeWatch()
        let failures = 0
        yield* send(0, "flaky")
        yield* send(1, "flaky")
        for (let n = 2; n < 8; n++) yield* send(n, `k${n}`)
        yield* Consumer.make({
          ...options(2),
          transaction,
          retrySchedule: Schedule.spaced("10 seconds"),
          handler: (m) =>
            watch.around(
              m,
              m.payload.n === 0 && failures++ < 2
                ? Effect.fail(new HandlerFailed({ n: 0, retriable: true }))
                : Effect.void
            )
        })
        yield* eventually(
          "the other keys finished during the back-off",
          Effect.sync(() => watch.finished.length === 6),
          "1 second"
        )
        assert.deepStrictEqual(watch.started.get("flaky"), [0])
        yield* eventually(
          "everything is committed",
          Effect.map(committedOffset("billing"), (o) => o === "8"),
          "1 second"
        )
        assert.deepStrictEqual(watch.started.get("flaky"), [0, 0, 0, 1])
      }).pipe(Effect.scoped, Effect.provide(layer()))
    )
  })
}

const permanent = (n: number) => Effect.fail(new HandlerFailed({ n, retriable: false }))

describe("Consumer key concurrency: window, parking, revocation, shutdown", () => {
  it.effect("holds at most maxHeld records of a partition; the gauges show the window", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const watch = makeWatch()
      for (let n = 0; n < 6; n++) yield* send(n, "a")
      for (let n = 6; n < 10; n++) yield* send(n, `b${n}`)
      yield* Consumer.make({
        ...options(2, { maxHeld: 4 }),
        handler: (m) => watch.around(m, m.payload.n === 0 ? Deferred.await(gate) : Effect.void)
      })
      yield* eventually(
        "record 0 started",
        Effect.sync(() => watch.started.get("a")?.length === 1)
      )
      yield* settle
      yield* TestClock.adjust("5 seconds")
      yield* settle
      // a0 runs, a1..a3 wait behind it: the window is full, so no record of the b keys was taken in.
      assert.deepStrictEqual(watch.finished, [])
      assert.deepStrictEqual([...watch.started.keys()], ["a"])
      const attributes = { group: "billing", topic: "orders", partition: "0" }
      const held = yield* Metric.value(Metric.withAttributes(Telemetry.consumerHeldRecords, attributes))
      const age = yield* Metric.value(Metric.withAttributes(Telemetry.consumerOldestUnfinishedAge, attributes))
      assert.strictEqual(held.value, 4)
      assert.isAtLeast(Number(age.value), 5_000)
      yield* Deferred.succeed(gate, undefined)
      yield* eventually(
        "the partition is committed to its end",
        Effect.map(committedOffset("billing"), (o) => o === "10")
      )
      yield* TestClock.adjust("1 second")
      const after = yield* Metric.value(Metric.withAttributes(Telemetry.consumerHeldRecords, attributes))
      assert.strictEqual(after.value, 0)
      assert.deepStrictEqual(watch.started.get("a"), [0, 1, 2, 3, 4, 5])
    }).pipe(Effect.scoped, Effect.provide(layer()))
  )

  it.effect("a dead-lettered record parks its key's successors while other keys flow; release runs them in order", () =>
    Effect.gen(function* () {
      const watch = makeWatch()
      let broken = true
      yield* send(0, "a")
      yield* send(1, "a")
      yield* send(2, "b")
      yield* send(3, "a")
      yield* send(4, "b")
      const consumer = yield* Consumer.make({
        ...options(4),
        parking: true,
        maxAttempts: 1,
        handler: (m) => watch.around(m, broken && m.payload.n === 0 ? permanent(0) : Effect.void)
      })
      yield* eventually(
        "key b finished",
        Effect.sync(() => watch.finished.length === 2)
      )
      yield* settle
      assert.deepStrictEqual(watch.started.get("b"), [2, 4])
      assert.deepStrictEqual(watch.started.get("a"), [0])
      assert.deepStrictEqual(yield* consumer.parked, [{ topic: "orders", partition: 0, key: "a", offsets: ["1", "3"] }])
      // Parked in memory, record 1 is unfinished: the commit stops below it.
      assert.strictEqual(yield* committedOffset("billing"), "1")
      assert.strictEqual(
        (yield* InMemoryBroker.InMemoryBroker.pipe(Effect.flatMap((b) => b.records("orders.DLT")))).length,
        1
      )
      broken = false
      assert.strictEqual(yield* consumer.release({ topic: "orders", partition: 0, key: "a" }), 2)
      assert.deepStrictEqual(watch.started.get("a"), [0, 1, 3])
      yield* send(5, "a")
      yield* eventually(
        "the partition is committed to its end",
        Effect.map(committedOffset("billing"), (o) => o === "6")
      )
      assert.deepStrictEqual(watch.started.get("a"), [0, 1, 3, 5])
      assert.strictEqual(watch.maxPerKey, 1)
    }).pipe(Effect.scoped, Effect.provide(layer()))
  )

  it.effect("durable parking: a parked key does not hold the commit nor other keys; release runs head first", () =>
    Effect.gen(function* () {
      const watch = makeWatch()
      let broken = true
      yield* send(0, "a")
      yield* send(1, "a")
      for (let n = 2; n < 8; n++) yield* send(n, `b${n}`)
      const consumer = yield* Consumer.make({
        ...options(3),
        parking: true,
        maxAttempts: 1,
        handler: (m) => watch.around(m, broken && m.payload.n === 0 ? permanent(0) : Effect.void)
      })
      yield* eventually(
        "everything but the parked key is committed",
        Effect.map(committedOffset("billing"), (o) => o === "8")
      )
      assert.deepStrictEqual(yield* consumer.parked, [{ topic: "orders", partition: 0, key: "a", offsets: ["0", "1"] }])
      broken = false
      assert.strictEqual(yield* consumer.release({ topic: "orders", partition: 0, key: "a" }), 2)
      assert.deepStrictEqual(watch.started.get("a"), [0, 0, 1])
      assert.deepStrictEqual(yield* consumer.parked, [])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(layer(), InMemoryParkedStore.layer())))
  )

  it.effect(
    "revocation: records not started are dropped, the running ones finish; the new owner runs the rest once",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const gateA = yield* Deferred.make<void>()
        const startsA: Array<number> = []
        const startsB: Array<number> = []
        for (let n = 0; n < 20; n++) yield* send(n, `k${n % 4}`)
        const revokedBefore = (yield* Metric.value(Telemetry.consumerRevokedRecordsTotal)).count
        yield* Consumer.make({
          ...options(4),
          handler: (m) =>
            Effect.andThen(
              Effect.sync(() => startsA.push(m.payload.n)),
              Deferred.await(gateA)
            )
        })
        yield* eventually(
          "A runs one record of each key",
          Effect.sync(() => startsA.length === 4)
        )
        yield* Consumer.make({
          ...options(4),
          handler: (m) => Effect.sync(() => startsB.push(m.payload.n))
        })
        yield* broker.rebalance("billing")
        yield* settle
        yield* Deferred.succeed(gateA, undefined)
        yield* eventually(
          "B committed the partition's end",
          Effect.map(committedOffset("billing"), (o) => o === "20")
        )
        assert.deepStrictEqual(
          [...startsA].sort((x, y) => x - y),
          [0, 1, 2, 3]
        )
        assert.isAtLeast((yield* Metric.value(Telemetry.consumerRevokedRecordsTotal)).count - revokedBefore, 16)
        // Every record ran on B once, except that A's four may run there too (the documented bound).
        for (let n = 4; n < 20; n++) assert.strictEqual(startsB.filter((x) => x === n).length, 1, `record ${n}`)
        for (let n = 0; n < 4; n++) assert.isAtMost(startsB.filter((x) => x === n).length, 1)
      }).pipe(Effect.scoped, Effect.provide(layer({ maxBatchSize: 5 })))
  )

  it.effect("shutdown lets the running records finish, commits them, and leaves the rest", () =>
    Effect.gen(function* () {
      const watch = makeWatch()
      for (let n = 0; n < 12; n++) yield* send(n, `k${n % 3}`)
      const scope = yield* Scope.make()
      yield* Consumer.make({
        ...options(3),
        handler: (m) => watch.around(m, Effect.sleep("1 second"))
      }).pipe(Scope.provide(scope))
      yield* eventually(
        "three records run",
        Effect.sync(() => watch.maxRunning === 3)
      )
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* eventually(
        "the consumer stopped",
        Effect.map(Fiber.await(closing).pipe(Effect.timeoutOption(0)), (o) => o._tag === "Some")
      )
      const committed = Number(yield* committedOffset("billing"))
      // The three running records finished; nothing after them was started.
      assert.strictEqual(watch.finished.length, 3)
      assert.strictEqual(committed, 3)
    }).pipe(Effect.scoped, Effect.provide(layer()))
  )
})

describe("Consumer key concurrency: transactions and keys", () => {
  it.effect("per-batch: a fetched batch is split by key, each key's records commit in one transaction", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const watch = makeWatch()
      for (let n = 0; n < 12; n++) yield* send(n, `k${n % 3}`)
      const before = yield* db.transactions
      yield* Consumer.make({
        ...options(3),
        transaction: "per-batch",
        handler: (m) => watch.around(m, Effect.void)
      })
      yield* eventually(
        "the partition is committed to its end",
        Effect.map(committedOffset("billing"), (o) => o === "12")
      )
      // One fetched batch of 12 records over 3 keys: three transactions, four records each.
      assert.strictEqual((yield* db.transactions).commits - before.commits, 3)
      assert.strictEqual((yield* db.processedKeys).size, 12)
      for (const [k, ns] of watch.started) assert.isTrue(ascending(ns), `key ${k} ran out of order: ${ns}`)
    }).pipe(Effect.scoped, Effect.provide(layer({ maxBatchSize: 12 })))
  )

  it.effect("records without a key share one lane: one at a time, in offset order", () =>
    Effect.gen(function* () {
      const watch = makeWatch()
      const publisher = yield* Publisher
      for (let n = 0; n < 6; n++) {
        yield* publisher.publish([
          {
            id: id(n),
            topic: "orders",
            key: null,
            partition: 0,
            headers: { "event-id": id(n) },
            payload: jsonPayload({ n })
          }
        ])
      }
      for (let n = 6; n < 9; n++) yield* send(n, `k${n}`)
      yield* Consumer.make({
        ...options(4),
        handler: (m) => watch.around(m, Effect.sleep("1 second"))
      })
      yield* eventually(
        "the partition is committed to its end",
        Effect.map(committedOffset("billing"), (o) => o === "9"),
        "250 millis"
      )
      assert.deepStrictEqual(watch.started.get("null"), [0, 1, 2, 3, 4, 5])
      assert.strictEqual(watch.maxPerKey, 1)
      assert.strictEqual(watch.maxRunning, 4)
    }).pipe(Effect.scoped, Effect.provide(layer()))
  )
})
