import { assert, describe, it } from "@effect/vitest"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { StoreError } from "../src/Errors.ts"
import * as Inbox from "../src/Inbox.ts"
import * as Telemetry from "../src/Telemetry.ts"
import { Transactor } from "../src/Transactor.ts"

class WorkFailed extends Schema.TaggedError<WorkFailed>()("WorkFailed", { reason: Schema.String }) {}

const TestLayer = Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer))
const key = { consumer: "billing", identity: "event:0190a0a0-0000-7000-8000-000000000001" }

describe("Inbox.processOnce", () => {
  it.effect("runs the work once and records the key in the same transaction", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const runs = yield* Ref.make(0)
      const first = yield* Inbox.processOnce(
        key,
        Ref.update(runs, (n) => n + 1)
      )
      const second = yield* Inbox.processOnce(
        key,
        Ref.update(runs, (n) => n + 1)
      )
      assert.strictEqual(first, "processed")
      assert.strictEqual(second, "already_processed")
      assert.strictEqual(yield* Ref.get(runs), 1)
      assert.isTrue((yield* db.processedKeys).has(InMemoryDatabase.processedKey(key.consumer, key.identity)))
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a failing work rolls back the record and the work's writes, and propagates typed", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const error = yield* Effect.flip(Inbox.processOnce(key, Effect.fail(new WorkFailed({ reason: "nope" }))))
      assert.strictEqual(error._tag, "WorkFailed")
      assert.strictEqual((yield* db.processedKeys).size, 0)
      assert.deepStrictEqual(yield* db.transactions, { commits: 0, rollbacks: 1 })
      // the record was rolled back, so a retry runs the work
      const runs = yield* Ref.make(0)
      assert.strictEqual(
        yield* Inbox.processOnce(
          key,
          Ref.update(runs, (n) => n + 1)
        ),
        "processed"
      )
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a defect in the work rolls back too", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const exit = yield* Effect.exit(Inbox.processOnce(key, Effect.die("bug")))
      assert.strictEqual(exit._tag, "Failure")
      assert.strictEqual((yield* db.processedKeys).size, 0)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a store failure propagates as StoreError and the work does not run", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.failNext({ count: 1, operations: ["inbox.record"], retriable: true })
      const runs = yield* Ref.make(0)
      const error = yield* Effect.flip(
        Inbox.processOnce(
          key,
          Ref.update(runs, (n) => n + 1)
        )
      )
      assert.instanceOf(error, StoreError)
      assert.isTrue(error.retriable)
      assert.strictEqual(yield* Ref.get(runs), 0)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("the same identity of another consumer is separate work", () =>
    Effect.gen(function* () {
      const runs = yield* Ref.make(0)
      yield* Inbox.processOnce(
        key,
        Ref.update(runs, (n) => n + 1)
      )
      const other = yield* Inbox.processOnce(
        { ...key, consumer: "shipping" },
        Ref.update(runs, (n) => n + 1)
      )
      assert.strictEqual(other, "processed")
      assert.strictEqual(yield* Ref.get(runs), 2)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("joins an outer transaction: rolling it back forgets the record", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const transactor = yield* Transactor
      const error = yield* Effect.flip(
        transactor.withTransaction(
          Inbox.processOnce(key, Effect.void).pipe(
            Effect.andThen(Effect.fail(new WorkFailed({ reason: "later step" })))
          )
        )
      )
      assert.strictEqual(error._tag, "WorkFailed")
      assert.strictEqual((yield* db.processedKeys).size, 0)
      assert.strictEqual(yield* Inbox.processOnce(key, Effect.void), "processed")
    }).pipe(Effect.provide(TestLayer))
  )
})

describe("Inbox.processBatch", () => {
  const k = (n: number) => ({ consumer: "billing", identity: `event:batch-${n}` })
  const outcomes = (results: ReadonlyArray<Exit.Exit<Inbox.Outcome, unknown>>) =>
    results.map((exit) =>
      Exit.isSuccess(exit) ? exit.value : exit.cause.reasons.map((r) => (r._tag === "Fail" ? r.error : r._tag))[0]
    )
  const fails = (n: number) => new WorkFailed({ reason: `work ${n} failed` })

  it.effect("records every key and runs the new ones' work in ONE transaction, in order", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* Inbox.processOnce(k(2), Effect.void)
      const ran = yield* Ref.make<Array<number>>([])
      const run = (n: number) => Ref.update(ran, (xs) => [...xs, n])
      const before = yield* db.transactions
      const results = yield* Inbox.processBatch([1, 2, 3].map((n) => ({ key: k(n), work: run(n) })))
      assert.deepStrictEqual(outcomes(results), ["processed", "already_processed", "processed"])
      assert.deepStrictEqual(yield* Ref.get(ran), [1, 3])
      const after = yield* db.transactions
      assert.strictEqual(after.commits - before.commits, 1)
      const keys = yield* db.processedKeys
      for (const n of [1, 2, 3]) assert.isTrue(keys.has(InMemoryDatabase.processedKey("billing", k(n).identity)))
      assert.deepStrictEqual(yield* Inbox.processBatch<never, never>([], {}), [])
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("one failing work: the others commit, the failing one reports its typed error and is not recorded", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const written = yield* Ref.make<Array<number>>([])
      // the work's own writes go through the database: a rolled-back try must leave none behind
      const work = (n: number): Effect.Effect<void, WorkFailed | StoreError, Inbox.Inbox> =>
        n === 3
          ? Effect.fail(fails(n))
          : Effect.andThen(
              Inbox.processOnce(k(100 + n), Effect.void),
              Ref.update(written, (xs) => [...xs, n])
            )
      const results = yield* Inbox.processBatch([1, 2, 3, 4, 5].map((n) => ({ key: k(n), work: work(n) })))
      assert.deepStrictEqual(outcomes(results), ["processed", "processed", fails(3), "processed", "processed"])
      const keys = yield* db.processedKeys
      for (const n of [1, 2, 4, 5]) {
        assert.isTrue(keys.has(InMemoryDatabase.processedKey("billing", k(n).identity)))
        assert.isTrue(keys.has(InMemoryDatabase.processedKey("billing", k(100 + n).identity)))
      }
      assert.isFalse(keys.has(InMemoryDatabase.processedKey("billing", k(3).identity)))
      assert.isFalse(keys.has(InMemoryDatabase.processedKey("billing", k(103).identity)))
      // a retry of the failed one runs its work
      assert.strictEqual(yield* Inbox.processOnce(k(3), Effect.void), "processed")
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("stopAtFailure: the result ends with the failure and later entries are neither run nor recorded", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const ran = yield* Ref.make<Array<number>>([])
      const work = (n: number) => (n === 2 ? Effect.fail(fails(n)) : Ref.update(ran, (xs) => [...xs, n]))
      const results = yield* Inbox.processBatch(
        [1, 2, 3].map((n) => ({ key: k(n), work: work(n) })),
        { stopAtFailure: true }
      )
      assert.deepStrictEqual(outcomes(results), ["processed", fails(2)])
      const keys = yield* db.processedKeys
      assert.deepStrictEqual([...keys].sort(), [InMemoryDatabase.processedKey("billing", k(1).identity)])
      // 1 ran in the rolled-back try and again in its own batch; 3 never ran
      assert.deepStrictEqual(yield* Ref.get(ran), [1, 1])
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("outbox_inbox_processed_total counts each entry's final outcome once", () =>
    Effect.gen(function* () {
      const counter = (outcome: string) =>
        Effect.map(Metric.value(Metric.withAttributes(Telemetry.inboxProcessed, { outcome })), (v) => v.count)
      const before = yield* Effect.all([counter("processed"), counter("already_processed"), counter("failed")])
      yield* Inbox.processOnce(k(2), Effect.void)
      yield* Inbox.processBatch([
        { key: k(1), work: Effect.void },
        { key: k(2), work: Effect.void },
        { key: k(3), work: Effect.fail(fails(3)) },
        { key: k(4), work: Effect.void }
      ])
      const after = yield* Effect.all([counter("processed"), counter("already_processed"), counter("failed")])
      // processOnce 1 processed; the batch 2 processed (1, 4), 1 already processed, 1 failed —
      // the rolled-back try is not counted
      assert.deepStrictEqual(
        after.map((n, i) => n - before[i]!),
        [3, 1, 1]
      )
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a defect in one work is that entry's failure; the batch goes on", () =>
    Effect.gen(function* () {
      const results = yield* Inbox.processBatch([
        { key: k(1), work: Effect.die("bug") },
        { key: k(2), work: Effect.void }
      ])
      assert.deepStrictEqual(outcomes(results), ["Die", "processed"])
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a failed commit: each entry is retried on its own, so the batch is not lost", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.failNext({ count: 1, operations: ["commit"], retriable: true })
      const results = yield* Inbox.processBatch([1, 2].map((n) => ({ key: k(n), work: Effect.void })))
      assert.deepStrictEqual(outcomes(results), ["processed", "processed"])
      assert.strictEqual((yield* db.processedKeys).size, 2)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a lost commit acknowledgement: the retry per entry finds the batch already processed", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.failNext({ count: 1, operations: ["commit"], timing: "after", retriable: true })
      const runs = yield* Ref.make(0)
      const results = yield* Inbox.processBatch(
        [1, 2].map((n) => ({ key: k(n), work: Ref.update(runs, (x) => x + 1) }))
      )
      assert.deepStrictEqual(outcomes(results), ["already_processed", "already_processed"])
      assert.strictEqual(yield* Ref.get(runs), 2)
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a store failure on every try surfaces as each entry's StoreError, and no work runs", () =>
    Effect.gen(function* () {
      yield* (yield* InMemoryDatabase.InMemoryDatabase).failNext({
        count: 3,
        operations: ["inbox.record"],
        retriable: true
      })
      const runs = yield* Ref.make(0)
      const results = yield* Inbox.processBatch(
        [1, 2].map((n) => ({ key: k(n), work: Ref.update(runs, (x) => x + 1) }))
      )
      for (const exit of results) {
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) assert.instanceOf(outcomes([exit])[0], StoreError)
      }
      assert.strictEqual(yield* Ref.get(runs), 0)
    }).pipe(Effect.provide(TestLayer))
  )
})

describe("Inbox identities", () => {
  const record = (headers: Record<string, string>) => ({ topic: "orders", partition: 3, offset: "42", headers })

  it("event-id identity is the default and survives a republish at another offset", () => {
    const a = Inbox.identityOf(record({ "event-id": "e-1" }))
    const b = Inbox.identityOf({ ...record({ "event-id": "e-1" }), partition: 0, offset: "7" })
    assert.strictEqual(a, "event:e-1")
    assert.strictEqual(a, b)
  })

  it("falls back to the offset identity without an event-id header (or an empty one)", () => {
    assert.strictEqual(Inbox.identityOf(record({})), "offset:orders/3/42")
    assert.strictEqual(Inbox.identityOf(record({ "event-id": "" })), "offset:orders/3/42")
  })

  it("offset identity treats a republish as new work", () => {
    const a = Inbox.identityOf(record({ "event-id": "e-1" }), "offset")
    const b = Inbox.identityOf({ ...record({ "event-id": "e-1" }), offset: "43" }, "offset")
    assert.strictEqual(a, "offset:orders/3/42")
    assert.notStrictEqual(a, b)
  })

  it("keyOf names the consumer", () => {
    assert.deepStrictEqual(Inbox.keyOf("billing", record({ "event-id": "e-1" })), {
      consumer: "billing",
      identity: "event:e-1"
    })
  })
})
