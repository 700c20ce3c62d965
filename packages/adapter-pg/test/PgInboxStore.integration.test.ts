// Processed-message records on the real database: duplicates are reported, never raised, and the
// caller's transaction stays usable.
import { assert, describe, it } from "@effect/vitest"
import * as Inbox from "@effect-outbox/core/Inbox"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const Live = PgInboxStore.layer.pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient()))
const key = { consumer: "billing", identity: "event:0190f1de-0000-7000-8000-000000000001" }

describe("PgInboxStore", () => {
  it.effect("records once; the second record of the same key is a duplicate", () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      assert.isFalse(yield* inbox.exists(key))
      assert.strictEqual(yield* inbox.record(key, T0), "recorded")
      assert.strictEqual(yield* inbox.record(key, T0 + 1), "duplicate")
      assert.isTrue(yield* inbox.exists(key))
      // same identity, other consumer: independent
      assert.strictEqual(yield* inbox.record({ ...key, consumer: "shipping" }, T0), "recorded")
    }).pipe(Effect.provide(Live))
  )

  it.effect("a duplicate inside a transaction leaves it usable, and a rollback removes the record", () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const sql = yield* SqlClient.SqlClient
      yield* inbox.record(key, T0)
      const after = yield* sql.withTransaction(
        Effect.gen(function* () {
          const outcome = yield* inbox.record(key, T0)
          // an aborted PostgreSQL transaction would refuse this statement
          const [{ one }] = yield* sql<{ one: number }>`SELECT 1 AS one`
          return [outcome, one] as const
        })
      )
      assert.deepStrictEqual(after, ["duplicate", 1])
      const other = { consumer: "billing", identity: "offset:orders/0/42" }
      yield* Effect.flip(sql.withTransaction(inbox.record(other, T0).pipe(Effect.andThen(Effect.fail("work failed")))))
      assert.isFalse(yield* inbox.exists(other))
    }).pipe(Effect.provide(Live))
  )

  it.live("a concurrent transaction holding the key: duplicate when it commits, recorded when it rolls back", () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const sql = yield* SqlClient.SqlClient
      const race = (commit: boolean, identity: string) =>
        Effect.gen(function* () {
          const k = { consumer: "billing", identity }
          const inserted = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holder = yield* Effect.forkChild(
            sql
              .withTransaction(
                Effect.gen(function* () {
                  yield* inbox.record(k, T0)
                  yield* Deferred.succeed(inserted, undefined)
                  yield* Deferred.await(release)
                  if (!commit) return yield* Effect.fail("rolled back" as const)
                })
              )
              .pipe(Effect.ignore)
          )
          yield* Deferred.await(inserted)
          const contender = yield* Effect.forkChild(inbox.record(k, T0 + 1))
          yield* Effect.sleep("100 millis")
          assert.isUndefined(contender.pollUnsafe(), "the contender waits for the holder")
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holder)
          return yield* Fiber.join(contender)
        })
      assert.strictEqual(yield* race(true, "event:a"), "duplicate")
      assert.strictEqual(yield* race(false, "event:b"), "recorded")
    }).pipe(Effect.provide(Live))
  )

  it.effect("other failures are errors, never duplicates", () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      yield* sql.unsafe(`ALTER TABLE ${t.processed} ADD CONSTRAINT no_x CHECK (identity <> 'x')`).unprepared
      const error = yield* Effect.flip(inbox.record({ consumer: "c", identity: "x" }, T0))
      assert.strictEqual(error._tag, "StoreError")
      assert.strictEqual(error.operation, "inbox.record")
      assert.match(error.reason, /ConstraintError/)
    }).pipe(Effect.provide(Live))
  )

  it.effect("purge forgets whole partitions only: a cut-off inside one keeps every record of it", () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      // Timeless keys of 2025, kept in the partition of everything before the first day.
      for (let i = 0; i < 5; i++) yield* inbox.record({ consumer: "c", identity: `i${i}` }, T0 + i)
      assert.strictEqual(yield* inbox.purge(T0 + 3, 2), 0)
      const kept = yield* Effect.forEach([0, 1, 2, 3, 4], (i) => inbox.exists({ consumer: "c", identity: `i${i}` }))
      assert.deepStrictEqual(kept, [true, true, true, true, true])
      assert.strictEqual(yield* inbox.horizon, Number.NEGATIVE_INFINITY)
    }).pipe(Effect.provide(Live))
  )
})

describe("Inbox.processBatch on PostgreSQL", () => {
  const WithInbox = Inbox.Inbox.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(PgInboxStore.layer, PgTransactor.layer)),
    Layer.provideMerge(freshTables()),
    Layer.provideMerge(pgClient())
  )
  const k = (n: number) => ({ consumer: "billing", identity: `event:pg-batch-${n}` })

  it.effect("the business writes of the good messages commit, the failing one's do not, and it is not recorded", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      const orders = `"${t.schema}"."orders"`
      yield* sql.unsafe(`CREATE TABLE ${orders} (n int PRIMARY KEY)`).unprepared
      yield* sql.unsafe(`INSERT INTO ${orders} VALUES (3)`).unprepared // message 3's write will conflict
      const write = (n: number) => sql.unsafe(`INSERT INTO ${orders} VALUES (${n})`)
      const results = yield* Inbox.processBatch([1, 2, 3, 4].map((n) => ({ key: k(n), work: write(n) })))
      assert.deepStrictEqual(
        results.map((exit) => (Exit.isSuccess(exit) ? exit.value : "failed")),
        ["processed", "processed", "failed", "processed"]
      )
      const rows = yield* sql.unsafe<{ n: number }>(`SELECT n FROM ${orders} ORDER BY n`)
      assert.deepStrictEqual(
        rows.map((r) => r.n),
        [1, 2, 3, 4]
      )
      const inbox = yield* InboxStore
      const recorded = yield* Effect.forEach([1, 2, 3, 4], (n) => inbox.exists(k(n)))
      assert.deepStrictEqual(recorded, [true, true, false, true])
      // a redelivery of the whole batch runs only the failed one's work again
      const again = yield* Inbox.processBatch([1, 2, 3, 4].map((n) => ({ key: k(n), work: Effect.void })))
      assert.deepStrictEqual(
        again.map((exit) => (Exit.isSuccess(exit) ? exit.value : "failed")),
        ["already_processed", "already_processed", "processed", "already_processed"]
      )
    }).pipe(Effect.provide(WithInbox))
  )
})
