// The infrastructure SQLSTATEs, raised by a real PostgreSQL, come out of the adapter as
// `StoreError`s of kind `unavailable`: the relay and the consumer wait for the database instead
// of spending a record's attempts. Each case makes the server itself refuse: a read-only
// database, a statement or lock timeout, a serialization failure, a deadlock, a terminated
// session, an idle-in-transaction timeout, a role out of connections.
import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import type { StoreError } from "@effect-outbox/core/Errors"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as PgErrors from "../src/PgErrors.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { databaseUrl, freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const StoreLive = PgOutboxStore.layer().pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(4)))

const message = (): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "t",
  key: null,
  partition: null,
  headers: {},
  payload: new Uint8Array(1),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0
})

/** The error the adapter makes of a failed statement: the one mapping every store call uses. */
const failure = <A, R>(statement: Effect.Effect<A, SqlError, R>) =>
  Effect.flip(statement).pipe(Effect.map(PgErrors.fromSqlError("probe")))

const assertUnavailable = (error: StoreError, state: string) => {
  assert.strictEqual(error._tag, "StoreError")
  assert.include(error.reason, `SQLSTATE ${state}`)
  assert.strictEqual(error.kind, "unavailable", error.reason)
}

/** Holds an exclusive lock on the outbox table in a transaction of its own until `release`. */
const holdTableLock = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const locked = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const holder = yield* Effect.forkChild(
    sql.withTransaction(
      Effect.gen(function* () {
        yield* sql.unsafe(`LOCK TABLE ${t.message} IN ACCESS EXCLUSIVE MODE`)
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      })
    )
  )
  yield* Deferred.await(locked)
  return Effect.andThen(Deferred.succeed(release, undefined), Fiber.join(holder))
})

describe("PgErrors against PostgreSQL: the infrastructure SQLSTATEs are unavailable", () => {
  it.live("25006: every transaction read-only (a demoted primary after a fail-over)", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      // This test's own single-connection pool: the session setting reaches no one else, and it
      // is undone before the fresh schema is dropped.
      yield* Effect.acquireRelease(sql`SET default_transaction_read_only = on`, () =>
        sql`SET default_transaction_read_only = off`.pipe(Effect.ignore)
      )
      const error = yield* Effect.flip(store.insert([message()]))
      assertUnavailable(error, "25006")
      assert.strictEqual(error.operation, "outbox.insert")
    }).pipe(
      Effect.scoped,
      Effect.provide(PgOutboxStore.layer().pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(1))))
    )
  )

  it.live("55P03 and 57014: a store call waiting on a lock past lock_timeout, or past statement_timeout", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const release = yield* holdTableLock
      const waiting = (setting: string) =>
        Effect.flip(
          sql.withTransaction(Effect.andThen(sql.unsafe(`SET LOCAL ${setting} = '50ms'`), store.get(message().id)))
        )
      const lock = yield* waiting("lock_timeout")
      const statement = yield* waiting("statement_timeout")
      yield* release
      assertUnavailable(lock as StoreError, "55P03")
      assertUnavailable(statement as StoreError, "57014")
    }).pipe(Effect.provide(StoreLive))
  )

  it.live("40001: a repeatable-read transaction writing a row another committed after its snapshot", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      const row = message()
      yield* store.insert([row])
      const bump = sql.unsafe(`UPDATE ${t.message} SET attempts = attempts + 1 WHERE id = $1`, [row.id])
      const snapshot = yield* Deferred.make<void>()
      const committed = yield* Deferred.make<void>()
      // Outside the transaction, on a connection of its own.
      const other = yield* Effect.forkChild(
        Deferred.await(snapshot).pipe(Effect.andThen(bump), Effect.andThen(Deferred.succeed(committed, undefined)))
      )
      const error = yield* failure(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
            yield* sql.unsafe(`SELECT attempts FROM ${t.message} WHERE id = $1`, [row.id])
            yield* Deferred.succeed(snapshot, undefined)
            yield* Deferred.await(committed)
            return yield* bump
          })
        )
      )
      yield* Fiber.join(other)
      assertUnavailable(error, "40001")
    }).pipe(Effect.provide(StoreLive))
  )

  it.live(
    "40P01: two transactions each waiting for the other's row",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const [a, b] = [message(), message()]
        yield* store.insert([a, b])
        const touch = (id: string) => sql.unsafe(`UPDATE ${t.message} SET attempts = attempts + 1 WHERE id = $1`, [id])
        const [aLocked, bLocked] = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
        const crossed = (
          first: string,
          mine: Deferred.Deferred<void>,
          theirs: Deferred.Deferred<void>,
          second: string
        ) =>
          sql.withTransaction(
            Effect.gen(function* () {
              yield* touch(first)
              yield* Deferred.succeed(mine, undefined)
              yield* Deferred.await(theirs)
              yield* touch(second)
            })
          )
        const results = yield* Effect.all(
          [crossed(a.id, aLocked, bLocked, b.id), crossed(b.id, bLocked, aLocked, a.id)].map((tx) =>
            Effect.result(Effect.mapError(tx, PgErrors.fromSqlError("probe")))
          ),
          { concurrency: 2 }
        )
        // PostgreSQL breaks the cycle by failing one of the two; the other commits.
        const failed = results.filter(Result.isFailure)
        assert.strictEqual(failed.length, 1)
        assertUnavailable(failed[0]!.failure, "40P01")
      }).pipe(Effect.provide(StoreLive)),
    20_000
  )

  it.live("57P01: the session is terminated (a fast shutdown or a fail-over ends every session)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const error = yield* failure(sql`SELECT pg_terminate_backend(pg_backend_pid())`)
      assertUnavailable(error, "57P01")
    }).pipe(Effect.provide(pgClient(1)))
  )

  it.live("25P03: a transaction left idle past idle_in_transaction_session_timeout", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const error = yield* failure(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET LOCAL idle_in_transaction_session_timeout = '50ms'`
            yield* Effect.sleep("500 millis")
            return yield* sql`SELECT 1`
          })
        )
      )
      assertUnavailable(error, "25P03")
    }).pipe(Effect.provide(pgClient(1)))
  )

  it.live("53300: a role out of connections (its connection limit reached)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const role = `outbox_limited_${randomUUID().replaceAll("-", "").slice(0, 12)}`
      yield* Effect.acquireRelease(sql.unsafe(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 0`), () =>
        sql.unsafe(`DROP ROLE IF EXISTS ${role}`).pipe(Effect.ignore)
      )
      const url = new URL(databaseUrl)
      url.username = role
      const refused = Effect.gen(function* () {
        const limited = yield* SqlClient.SqlClient
        return yield* limited`SELECT 1`
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url.toString()), maxConnections: 1 })))
      const error = yield* failure(Effect.scoped(refused))
      assertUnavailable(error, "53300")
    }).pipe(Effect.scoped, Effect.provide(pgClient(1)))
  )

  it.live("08: nothing listens on the port (connection refused)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const error = yield* failure(sql`SELECT 1`)
      assert.include(error.reason, "ConnectionError")
      assert.strictEqual(error.kind, "unavailable")
    }).pipe(
      Effect.provide(
        PgClient.layer({ url: Redacted.make("postgres://postgres@127.0.0.1:1/postgres"), connectTimeout: "2 seconds" })
      )
    )
  )

  it.live("a request's own error (division by zero) is permanent", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const error = yield* failure(sql`SELECT 1 / 0`)
      assert.include(error.reason, "SQLSTATE 22012")
      assert.strictEqual(error.kind, "permanent")
    }).pipe(Effect.provide(pgClient(1)))
  )
})
