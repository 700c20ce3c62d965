// The transaction port on the real database.
import { assert, describe, it } from "@effect/vitest"
import { StoreError } from "@effect-outbox/core/Errors"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgTransactor from "../src/PgTransactor.ts"
import { freshSchema, pgClient, recordingTracer } from "./support.ts"

const Live = PgTransactor.layer.pipe(Layer.provideMerge(pgClient()))

const withTable = <A, E, R>(f: (table: string) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const table = `public.${freshSchema()}`
    yield* sql.unsafe(`CREATE TABLE ${table} (id int PRIMARY KEY,
      ref int UNIQUE DEFERRABLE INITIALLY DEFERRED)`).unprepared
    return yield* f(table).pipe(Effect.ensuring(sql.unsafe(`DROP TABLE ${table}`).unprepared.pipe(Effect.ignore)))
  })

const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)
  ).pipe(Effect.map((rows) => rows[0]!.n))

describe("PgTransactor", () => {
  it.effect("commits on success, rolls back on failure, and passes the caller's error through", () =>
    withTable((table) =>
      Effect.gen(function* () {
        const tx = yield* Transactor
        const sql = yield* SqlClient.SqlClient
        yield* tx.withTransaction(sql.unsafe(`INSERT INTO ${table} (id) VALUES (1)`))
        const error = yield* Effect.flip(
          tx.withTransaction(
            sql.unsafe(`INSERT INTO ${table} (id) VALUES (2)`).pipe(Effect.andThen(Effect.fail("nope" as const)))
          )
        )
        assert.strictEqual(error, "nope")
        assert.strictEqual(yield* count(table), 1)
      })
    ).pipe(Effect.provide(Live))
  )

  it.effect("nested calls join the outer transaction", () =>
    withTable((table) =>
      Effect.gen(function* () {
        const tx = yield* Transactor
        const sql = yield* SqlClient.SqlClient
        yield* Effect.flip(
          tx.withTransaction(
            Effect.gen(function* () {
              yield* tx.withTransaction(sql.unsafe(`INSERT INTO ${table} (id) VALUES (1)`))
              return yield* Effect.fail("outer fails")
            })
          )
        )
        assert.strictEqual(yield* count(table), 0)
      })
    ).pipe(Effect.provide(Live))
  )

  it.effect(
    "a nested call opens no savepoint; if it fails and the caller goes on, the whole transaction rolls back",
    () =>
      withTable((table) =>
        Effect.gen(function* () {
          const tx = yield* Transactor
          const sql = yield* SqlClient.SqlClient
          const recorded = recordingTracer()
          yield* tx
            .withTransaction(
              Effect.gen(function* () {
                yield* sql.unsafe(`INSERT INTO ${table} (id) VALUES (1)`)
                yield* tx.withTransaction(sql.unsafe(`INSERT INTO ${table} (id) VALUES (2)`))
              })
            )
            .pipe(Effect.withTracer(recorded.tracer))
          assert.strictEqual(recorded.transactions(), 1, "no nested transaction, so no SAVEPOINT")
          assert.strictEqual(yield* count(table), 2)
          const error = yield* Effect.flip(
            tx.withTransaction(
              Effect.gen(function* () {
                yield* sql.unsafe(`INSERT INTO ${table} (id) VALUES (3)`)
                yield* Effect.ignore(
                  tx.withTransaction(
                    sql.unsafe(`INSERT INTO ${table} (id) VALUES (4)`).pipe(Effect.andThen(Effect.fail("inner")))
                  )
                )
              })
            )
          )
          assert.strictEqual(
            error instanceof StoreError && error.reason.includes("nested withTransaction failed"),
            true
          )
          assert.strictEqual(yield* count(table), 2, "neither 3 nor the half of the nested call committed")
          // a savepoint the caller opened is the way to recover inside the transaction
          yield* tx.withTransaction(
            Effect.gen(function* () {
              yield* sql.unsafe(`INSERT INTO ${table} (id) VALUES (5)`)
              yield* Effect.ignore(
                sql.withTransaction(
                  tx.withTransaction(
                    sql.unsafe(`INSERT INTO ${table} (id) VALUES (6)`).pipe(Effect.andThen(Effect.fail("inner")))
                  )
                )
              )
            })
          )
          assert.deepStrictEqual(
            (yield* sql.unsafe<{ id: number }>(`SELECT id FROM ${table} ORDER BY id`)).map((r) => r.id),
            [1, 2, 5],
            "5 committed, 6 rolled back with its savepoint"
          )
        })
      ).pipe(Effect.provide(Live))
  )

  it.effect("a failed COMMIT surfaces as StoreError naming the transaction", () =>
    withTable((table) =>
      Effect.gen(function* () {
        const tx = yield* Transactor
        const sql = yield* SqlClient.SqlClient
        // the deferred unique check fires only at COMMIT
        const error = yield* Effect.flip(tx.withTransaction(sql.unsafe(`INSERT INTO ${table} VALUES (1, 7), (2, 7)`)))
        assert.strictEqual(error._tag, "StoreError")
        if (error._tag === "StoreError") {
          assert.strictEqual(error.operation, "transaction")
          assert.isFalse(error.retriable)
          assert.match(error.reason, /UniqueViolation|23505/)
        }
        assert.strictEqual(yield* count(table), 0)
      })
    ).pipe(Effect.provide(Live))
  )

  it.live("a connection killed mid-transaction fails typed and retriable, never as a defect", () =>
    Effect.gen(function* () {
      const tx = yield* Transactor
      const sql = yield* SqlClient.SqlClient
      const error = yield* Effect.flip(
        tx.withTransaction(
          Effect.gen(function* () {
            const [{ pid }] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
            // another connection of the pool ends this transaction's backend
            yield* Effect.forkDetach(sql`SELECT pg_terminate_backend(${pid}::int4)`.pipe(Effect.ignore))
            yield* Effect.sleep("300 millis")
            return yield* sql`SELECT 1`
          })
        )
      )
      const retriable = error._tag === "StoreError" ? error.retriable : error.isRetryable
      assert.isTrue(retriable, `${error._tag}: ${error.message}`)
      // the pool recovers
      const [{ one }] = yield* sql<{ one: number }>`SELECT 1 AS one`
      assert.strictEqual(one, 1)
    }).pipe(Effect.provide(Live))
  )
})
