import { assert, describe, it } from "@effect/vitest"
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import * as Inbox from "@effect-outbox/core/Inbox"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"

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

  it.effect("a store failure propagates as OutboxStoreError and the work does not run", () =>
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
      assert.instanceOf(error, OutboxStoreError)
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
