// PostgreSQL outages as the in-memory database plays them: each phase fails with the
// SQLSTATE PostgreSQL gives, classified as adapter-pg classifies it (adapter-pg's tests check
// that its PgErrors.fromSqlError gives the same error for each phase).
import { assert, describe, it } from "@effect/vitest"
import { StoreError } from "@effect-outbox/core/Errors"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import { Deferred, Effect, Fiber } from "effect"
import { SqlError } from "effect/sql/SqlError"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"

const id = (n: number) => `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId
const draft = (n: number): NewOutboxMessage => ({
  id: id(n),
  topic: "orders",
  key: "k",
  partition: null,
  headers: { "event-id": id(n) },
  payload: new Uint8Array([n]),
  status: "PENDING",
  availableAt: 0,
  createdAt: 100
})

/** The store error and the driver error under it. */
const storeError = (error: unknown) => {
  assert.instanceOf(error, StoreError)
  const cause = (error as StoreError).cause
  assert.instanceOf(cause, SqlError)
  return { error: error as StoreError, cause: cause as SqlError }
}

describe("InMemoryDatabase outages", () => {
  for (const [mode, reason, state] of [
    ["shutdown", "UnknownError (SQLSTATE 57P03)", "the database system is shutting down"],
    ["startup", "UnknownError (SQLSTATE 57P03)", "the database system is starting up"],
    ["down", "ConnectionError (SQLSTATE ECONNREFUSED)", "ECONNREFUSED"]
  ] as const) {
    it.effect(`${mode}: a new transaction and a call outside one fail as adapter-pg reports it (${state})`, () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const store = yield* OutboxStore
        yield* db.outage({ mode })
        const begin = storeError(yield* Effect.flip((yield* Transactor).withTransaction(store.insert([draft(1)]))))
        const outside = storeError(yield* Effect.flip(store.insert([draft(2)])))
        for (const { cause, error } of [begin, outside]) {
          assert.include(error.reason, reason)
          assert.include(error.reason, state)
          // A server that is out of service is worth asking again.
          assert.isTrue(error.retriable)
          assert.strictEqual(error.reason, InMemoryDatabase.defaultSqlErrorMapping(error.operation)(cause).reason)
        }
        assert.deepStrictEqual(yield* db.rows, [])
        yield* db.recover
        yield* store.insert([draft(3)])
        assert.deepStrictEqual(
          (yield* db.rows).map((r) => r.id),
          [id(3)]
        )
      }).pipe(Effect.provide(InMemoryDatabase.layer))
    )
  }

  for (const [mode, reason] of [
    ["down", "ConnectionError (SQLSTATE 08006)"],
    ["shutdown", "UnknownError (SQLSTATE 57P01)"]
  ] as const) {
    it.effect(`${mode}: a transaction open when the outage begins is cut off, even after recovery (${reason})`, () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const store = yield* OutboxStore
        const opened = yield* Deferred.make<void>()
        const resume = yield* Deferred.make<void>()
        const fiber = yield* Effect.forkChild(
          Effect.flip(
            (yield* Transactor).withTransaction(
              Effect.gen(function* () {
                yield* store.insert([draft(1)])
                yield* Deferred.succeed(opened, undefined)
                yield* Deferred.await(resume)
                yield* store.insert([draft(2)])
              })
            )
          )
        )
        yield* Deferred.await(opened)
        yield* db.outage({ mode })
        yield* db.recover
        yield* Deferred.succeed(resume, undefined)
        const { error } = storeError(yield* Fiber.join(fiber))
        assert.include(error.reason, reason)
        assert.deepStrictEqual(yield* db.rows, [], "nothing of the cut-off transaction is committed")
        yield* (yield* Transactor).withTransaction(store.insert([draft(3)]))
        assert.strictEqual((yield* db.rows).length, 1)
      }).pipe(Effect.provide(InMemoryDatabase.layer))
    )
  }

  it.effect("a lost commit acknowledgement: the transaction is committed, its caller gets 08006", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      const store = yield* OutboxStore
      const opened = yield* Deferred.make<void>()
      const resume = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        Effect.flip(
          (yield* Transactor).withTransaction(
            Effect.andThen(
              store.insert([draft(1)]),
              Effect.andThen(Deferred.succeed(opened, undefined), Deferred.await(resume))
            )
          )
        )
      )
      yield* Deferred.await(opened)
      yield* db.outage({ mode: "crash", lostCommitAcks: 1 })
      yield* Deferred.succeed(resume, undefined)
      const { error } = storeError(yield* Fiber.join(fiber))
      assert.include(error.reason, "ConnectionError (SQLSTATE 08006)")
      assert.isTrue(error.retriable)
      yield* db.recover
      assert.deepStrictEqual(
        (yield* db.rows).map((r) => r.id),
        [id(1)]
      )
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("a different error mapping can be set (to test a wrong classification)", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.setSqlErrorMapping(
        (operation) => (error) => new StoreError({ operation, reason: error.message, kind: "permanent" })
      )
      yield* db.outage({ mode: "down" })
      const error = yield* Effect.flip((yield* OutboxStore).insert([draft(1)]))
      assert.isFalse(error.retriable)
      yield* db.setSqlErrorMapping(undefined)
      assert.isTrue((yield* Effect.flip((yield* OutboxStore).insert([draft(1)]))).retriable)
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )
})
