// The deduplication window, on the in-memory database (which keeps records by their event's time
// in one-day spans and forgets whole spans, like PostgreSQL's partitions): a message older than
// what the inbox still remembers is never run as new without saying so.
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import * as Consumer from "../src/Consumer.ts"
import * as DeadLetter from "../src/DeadLetter.ts"
import * as Inbox from "../src/Inbox.ts"
import { InboxStore } from "../src/InboxStore.ts"
import { type EventId, jsonPayload, ORIGINAL_TIMESTAMP_HEADER } from "../src/OutboxMessage.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Telemetry from "../src/Telemetry.ts"
import { eventually } from "./support/consumerTest.ts"

/** Events of 2024-07 (UUIDv7 ids carry their time), far older than "now" (the wall clock). */
const EVENT_TIME = 0x0190a0a00000
const id = (n: number) => `0190a0a0-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId
const key = (n: number) => ({ consumer: "billing", identity: `event:${id(n)}` })
const expiredCount = Effect.map(
  Metric.value(Metric.withAttributes(Telemetry.inboxProcessed, { outcome: "expired" })),
  (v) => v.count
)
/** Forgets every span that ended by now: the events of 2024 fall out of the window. */
const forgetThePast = Effect.flatMap(InboxStore, (store) => store.purge(Date.now(), 1000))

const TestLayer = Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer))

describe("Inbox: the deduplication window", () => {
  it.effect("a message older than what the inbox remembers is expired: its work does not run", () =>
    Effect.gen(function* () {
      const runs = yield* Ref.make(0)
      const work = Ref.update(runs, (n) => n + 1)
      assert.strictEqual(yield* Inbox.processOnce(key(1), work), "processed")
      assert.strictEqual(yield* Inbox.processOnce(key(1), work), "already_processed")
      const before = yield* expiredCount
      assert.strictEqual(yield* forgetThePast, 1)
      // Forgotten: it may have run, so it is not run as new.
      assert.strictEqual(yield* Inbox.processOnce(key(1), work), "expired")
      assert.strictEqual(yield* Inbox.processOnce(key(2), work), "expired")
      assert.strictEqual(yield* Ref.get(runs), 1)
      assert.strictEqual((yield* expiredCount) - before, 2)
      // A message inside the window is still deduplicated as before.
      const recent = { consumer: "billing", identity: "event:recent", eventTime: Date.now() }
      assert.deepStrictEqual(
        [yield* Inbox.processOnce(recent, work), yield* Inbox.processOnce(recent, work)],
        ["processed", "already_processed"]
      )
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("processBatch: an expired entry is reported; with stopAtFailure nothing after it runs or is recorded", () =>
    Effect.gen(function* () {
      yield* forgetThePast
      const ran = yield* Ref.make<ReadonlyArray<string>>([])
      const entry = (name: string, eventTime: number) => ({
        key: { consumer: "billing", identity: `event:${name}`, eventTime },
        work: Ref.update(ran, (all) => [...all, name])
      })
      const now = Date.now()
      const entries = [entry("a", now), entry("old", EVENT_TIME), entry("b", now)]
      const outcomes = (results: ReadonlyArray<Exit.Exit<Inbox.Outcome, unknown>>) =>
        results.map((exit) => (Exit.isSuccess(exit) ? exit.value : "failed"))
      assert.deepStrictEqual(outcomes(yield* Inbox.processBatch(entries, { stopAtFailure: true })), [
        "processed",
        "expired"
      ])
      assert.deepStrictEqual(yield* Ref.get(ran), ["a"])
      const store = yield* InboxStore
      assert.isFalse(yield* store.exists(entries[2]!.key))
      // Without stopAtFailure every entry gets its outcome.
      assert.deepStrictEqual(outcomes(yield* Inbox.processBatch(entries)), [
        "already_processed",
        "expired",
        "processed"
      ])
      assert.deepStrictEqual(yield* Ref.get(ran), ["a", "b"])
    }).pipe(Effect.provide(TestLayer))
  )
})

describe("Inbox.keyOf: the time a record is kept by", () => {
  const record = (headers: Record<string, string>, timestamp?: number) => ({
    topic: "orders",
    partition: 0,
    offset: "7",
    headers,
    timestamp
  })
  it("a UUIDv7 event id's own time, whatever the record's timestamp", () => {
    assert.strictEqual(Inbox.keyOf("billing", record({ "event-id": id(1) }, 5)).eventTime, EVENT_TIME)
  })
  it("the record's timestamp for an event id without a time or the offset identity", () => {
    assert.strictEqual(Inbox.keyOf("billing", record({ "event-id": "order-1" }, 5)).eventTime, 5)
    assert.strictEqual(Inbox.keyOf("billing", record({}, 5), "offset").eventTime, 5)
  })
  it("a replay's original timestamp, so it meets the original's record", () => {
    const replay = record({ "outbox-original-record": "orders/0/3", [ORIGINAL_TIMESTAMP_HEADER]: "42" }, 99)
    assert.deepStrictEqual(Inbox.keyOf("billing", replay, "offset"), {
      consumer: "billing",
      identity: "offset:orders/0/3",
      eventTime: 42
    })
  })
  it("DeadLetter.toReplayRequest carries the original's timestamp", () =>
    Effect.gen(function* () {
      const original = { ...record({}, 1234), key: null, value: new Uint8Array(), timestamp: 1234 }
      const letter = yield* DeadLetter.toPublishRequest(original, "orders.DLT", {
        error: new Error("boom"),
        attempts: 1,
        classification: "permanent",
        consumerGroup: "billing"
      })
      const parsed = DeadLetter.parse({ ...original, topic: "orders.DLT", headers: letter.headers })
      assert.strictEqual(parsed._tag, "Some")
      if (parsed._tag === "Some") {
        const replay = yield* DeadLetter.toReplayRequest(parsed.value)
        assert.strictEqual(replay.headers[ORIGINAL_TIMESTAMP_HEADER], "1234")
      }
    }).pipe(Effect.runSync))
})

const Order = Schema.Struct({ n: Schema.Number })
const send = (n: number) =>
  Effect.flatMap(Publisher, (publisher) =>
    publisher.publish([
      {
        id: id(n),
        topic: "orders",
        key: `k${n}`,
        partition: 0,
        headers: { "event-id": id(n) },
        payload: jsonPayload({ n })
      }
    ])
  )
const makeLayer = () =>
  Layer.mergeAll(
    Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)),
    InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 1 } })
  )
const committed = (offset: string) =>
  Effect.flatMap(InMemoryBroker.InMemoryBroker, (broker) =>
    Effect.map(broker.committed("billing"), (c) => c.some((o) => o.topic === "orders" && o.offset === offset))
  )

for (const transaction of ["per-record", "per-batch"] as const) {
  describe(`Consumer (${transaction}): a redelivery older than the window`, () => {
    const run = (onExpired: Inbox.ExpiredPolicy | undefined) =>
      Effect.gen(function* () {
        // The consumer's clock is the wall clock's "now", which the window was cut at.
        yield* TestClock.setTime(Date.now())
        const handled = yield* Ref.make<ReadonlyArray<number>>([])
        const warnings = yield* Ref.make<ReadonlyArray<string>>([])
        const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
          if (logLevel === "Warn") Effect.runSync(Ref.update(warnings, (all) => [...all, String(message)]))
        })
        yield* send(1)
        yield* send(2)
        // Event 1 was handled long ago; its record is then forgotten with its span.
        assert.strictEqual(
          yield* Inbox.processOnce(
            key(1),
            Ref.update(handled, (all) => [...all, 1])
          ),
          "processed"
        )
        yield* forgetThePast
        yield* Consumer.make({
          groupId: "billing",
          topics: ["orders"],
          schema: Order,
          transaction,
          retrySchedule: Schedule.spaced("1 second"),
          ...(onExpired === undefined ? {} : { onExpired }),
          handler: (message) => Ref.update(handled, (all) => [...all, message.payload.n])
        }).pipe(Effect.provide(Logger.layer([logger])))
        yield* eventually("offset 2 is committed", committed("2"))
        // Redelivered once more (a replay): under "process" it ran and was recorded at that time.
        yield* send(1)
        yield* eventually("offset 3 is committed", committed("3"))
        const broker = yield* InMemoryBroker.InMemoryBroker
        return {
          handled: yield* Ref.get(handled),
          warnings: yield* Ref.get(warnings),
          dlt: yield* broker.records("orders.DLT")
        }
      }).pipe(Effect.scoped, Effect.provide(makeLayer()))

    it.effect("dead-letters it by default with InboxWindowExpiredError and a WARN; the handler does not run", () =>
      Effect.gen(function* () {
        const before = yield* expiredCount
        const { dlt, handled, warnings } = yield* run(undefined)
        assert.deepStrictEqual(handled, [1])
        assert.strictEqual(dlt.length, 3)
        const letter = DeadLetter.parse(dlt[0]!)
        assert.strictEqual(letter._tag, "Some")
        if (letter._tag === "Some") {
          assert.strictEqual(letter.value.errorClass, "InboxWindowExpiredError")
          assert.strictEqual(letter.value.attempts, 1)
          assert.include(letter.value.errorMessage, "older than the inbox's deduplication window")
        }
        assert.isTrue(warnings.some((w) => w.includes('onExpired: "dead-letter"')))
        assert.isAtLeast((yield* expiredCount) - before, 3)
      })
    )

    it.effect('onExpired: "process" runs it knowingly as new, once, with a WARN', () =>
      Effect.gen(function* () {
        const { dlt, handled, warnings } = yield* run("process")
        assert.deepStrictEqual(handled, [1, 1, 2])
        assert.strictEqual(dlt.length, 0)
        assert.isTrue(warnings.some((w) => w.includes("it may run a second time")))
      })
    )
  })
}
