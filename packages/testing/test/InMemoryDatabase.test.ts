import { assert, describe, it } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import { Deferred, Effect, Fiber, Option } from "effect"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"

const id = (n: number) => `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId
const draft = (n: number, key: string | null = "k"): NewOutboxMessage => ({
  id: id(n),
  topic: "orders",
  key,
  partition: null,
  headers: { "event-id": id(n) },
  payload: new Uint8Array([n]),
  status: "PENDING",
  availableAt: 0,
  createdAt: 100
})

describe("InMemoryDatabase", () => {
  it.effect("a rolled-back transaction leaves no rows, no history and no processed keys", () =>
    Effect.gen(function* () {
      const tx = yield* Transactor
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const error = yield* Effect.flip(
        tx.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([draft(1)])
            yield* inbox.record({ consumer: "c", identity: "event:1" }, 5)
            return yield* Effect.fail("boom" as const)
          })
        )
      )
      assert.strictEqual(error, "boom")
      assert.deepStrictEqual(yield* db.rows, [])
      assert.deepStrictEqual(yield* db.history, [])
      assert.strictEqual((yield* db.processedKeys).size, 0)
      assert.deepStrictEqual(yield* db.transactions, { commits: 0, rollbacks: 1 })
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("a writer of a row locked by an open transaction waits for it to end", () =>
    Effect.gen(function* () {
      const tx = yield* Transactor
      const store = yield* OutboxStore
      yield* store.insert([draft(1)])
      const inTx = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        tx.withTransaction(
          Effect.gen(function* () {
            yield* store.transition([{ id: id(1), from: ["PENDING"], to: "DISPATCHING", patch: {}, now: 1 }])
            yield* Deferred.succeed(inTx, undefined)
            yield* Deferred.await(release)
          })
        )
      )
      yield* Deferred.await(inTx)
      // Another writer sees the committed PENDING row and waits on the lock.
      assert.strictEqual(Option.getOrThrow(yield* store.get(id(1))).status, "PENDING")
      const waiter = yield* Effect.forkChild(
        store.transition([{ id: id(1), from: ["PENDING"], to: "DISPATCHING", patch: {}, now: 2 }])
      )
      yield* Effect.yieldNow
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      const [outcome] = yield* Fiber.join(waiter)
      assert.strictEqual(outcome!.outcome, "rejected")
      assert.strictEqual(outcome!.current, "DISPATCHING")
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("injected faults fail the chosen calls before or after writing", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.failNext({ count: 1, operations: ["outbox.insert"] })
      const before = yield* Effect.flip(store.insert([draft(1)]))
      assert.isTrue(before.retriable)
      assert.strictEqual((yield* db.rows).length, 0)
      yield* db.failNext({ count: 1, operations: ["outbox.insert"], timing: "after" })
      yield* Effect.flip(store.insert([draft(1)]))
      assert.strictEqual((yield* db.rows).length, 1)
      yield* store.insert([draft(2)])
      assert.strictEqual(yield* db.faultsFired, 2)
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("a commit fault 'after' commits yet reports failure (lost acknowledgement)", () =>
    Effect.gen(function* () {
      const tx = yield* Transactor
      const store = yield* OutboxStore
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.failNext({ count: 1, operations: ["commit"], timing: "after" })
      const error = yield* Effect.flip(tx.withTransaction(store.insert([draft(1)])))
      assert.strictEqual(error._tag, "StoreError")
      assert.strictEqual((yield* db.rows).length, 1)
      yield* db.failNext({ count: 1, operations: ["commit"] })
      yield* Effect.flip(tx.withTransaction(store.insert([draft(2)])))
      assert.strictEqual((yield* db.rows).length, 1)
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("the history log records every committed status change", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* store.insert([draft(1)])
      yield* store.claim({ owner: "r", limit: 10, maxPerKey: 10, leaseMillis: 100, now: 10 })
      yield* store.transition([{ id: id(1), from: ["DISPATCHING"], to: "PUBLISHED", patch: {}, now: 20 }])
      const history = yield* db.history
      assert.deepStrictEqual(
        history.map((h) => [h.from, h.to, h.operation]),
        [
          [null, "PENDING", "insert"],
          ["PENDING", "DISPATCHING", "claim"],
          ["DISPATCHING", "PUBLISHED", "transition"]
        ]
      )
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )
})

describe("InMemoryDatabase deadlocks", () => {
  it.effect("two transactions waiting for each other's rows: one fails retriably, the other commits", () =>
    Effect.gen(function* () {
      const tx = yield* Transactor
      const store = yield* OutboxStore
      yield* store.insert([draft(1, "a"), draft(2, "b")])
      const move = (n: number, now: number) =>
        store.transition([{ id: id(n), from: ["PENDING"], to: "DISPATCHING", patch: {}, now }])
      const aHolds = yield* Deferred.make<void>()
      const bHolds = yield* Deferred.make<void>()
      const a = yield* Effect.forkChild(
        Effect.result(
          tx.withTransaction(
            Effect.gen(function* () {
              yield* move(1, 1)
              yield* Deferred.succeed(aHolds, undefined)
              yield* Deferred.await(bHolds)
              return yield* move(2, 1)
            })
          )
        )
      )
      const b = yield* Effect.forkChild(
        Effect.result(
          tx.withTransaction(
            Effect.gen(function* () {
              yield* move(2, 2)
              yield* Deferred.succeed(bHolds, undefined)
              yield* Deferred.await(aHolds)
              return yield* move(1, 2)
            })
          )
        )
      )
      const results = [yield* Fiber.join(a), yield* Fiber.join(b)]
      const failed = results.filter((r) => r._tag === "Failure")
      assert.strictEqual(failed.length, 1)
      assert.isTrue(failed[0]!._tag === "Failure" && failed[0]!.failure.retriable)
      const db = yield* InMemoryDatabase.InMemoryDatabase
      assert.deepStrictEqual(yield* db.transactions, { commits: 1, rollbacks: 1 })
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )
})
