// The in-memory database of @effect-outbox/testing plays PostgreSQL outages and classifies their
// driver errors with its own copy of this adapter's rule (the fakes depend on no adapter). Here
// the copy is held to the original: for every outage phase, the port error the fake reports is
// the one PgErrors.fromSqlError makes of the same driver error, field for field.
import { assert, describe, it } from "@effect/vitest"
import { StoreError } from "@effect-outbox/core/Errors"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import { Deferred, Effect, Fiber } from "effect"
import { SqlError } from "effect/sql/SqlError"
import { fromSqlError } from "../src/PgErrors.ts"

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

/** Every field of the port error but the driver error under it. */
const fields = (error: StoreError) => {
  const { cause: _cause, ...rest } = { ...error }
  return rest
}

/** The fake's error equals the adapter's mapping of the same driver error. */
const assertParity = (error: unknown) => {
  assert.instanceOf(error, StoreError)
  const cause = (error as StoreError).cause
  assert.instanceOf(cause, SqlError)
  const adapter = fromSqlError((error as StoreError).operation)(cause as SqlError)
  assert.deepStrictEqual(fields(error as StoreError), fields(adapter))
}

/** A transaction that has written one row and waits; its next statement runs on `resume`. */
const openTransaction = Effect.gen(function* () {
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
  return { resume, fiber }
})

describe("InMemoryDatabase outages classify as PgErrors.fromSqlError does", () => {
  for (const mode of ["shutdown", "startup", "down", "crash"] as const) {
    it.effect(`${mode}: a new transaction and a call outside one`, () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const store = yield* OutboxStore
        yield* db.outage({ mode })
        assertParity(yield* Effect.flip((yield* Transactor).withTransaction(store.insert([draft(1)]))))
        assertParity(yield* Effect.flip(store.insert([draft(2)])))
      }).pipe(Effect.provide(InMemoryDatabase.layer))
    )
  }

  for (const mode of ["shutdown", "down", "crash"] as const) {
    it.effect(`${mode}: a transaction cut off by the outage`, () =>
      Effect.gen(function* () {
        const db = yield* InMemoryDatabase.InMemoryDatabase
        const { fiber, resume } = yield* openTransaction
        yield* db.outage({ mode })
        yield* db.recover
        yield* Deferred.succeed(resume, undefined)
        assertParity(yield* Fiber.join(fiber))
      }).pipe(Effect.provide(InMemoryDatabase.layer))
    )
  }

  it.effect("a lost commit acknowledgement", () =>
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
      assertParity(yield* Fiber.join(fiber))
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )

  it.effect("the adapter's own mapping can be injected and gives the same errors", () =>
    Effect.gen(function* () {
      const db = yield* InMemoryDatabase.InMemoryDatabase
      yield* db.setSqlErrorMapping(fromSqlError)
      yield* db.outage({ mode: "shutdown" })
      const injected = yield* Effect.flip((yield* OutboxStore).insert([draft(1)]))
      yield* db.setSqlErrorMapping(undefined)
      const local = yield* Effect.flip((yield* OutboxStore).insert([draft(1)]))
      assert.deepStrictEqual(fields(injected), fields(local))
      assert.isTrue(local.retriable)
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )
})
