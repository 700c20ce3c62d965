// PgLogSource's streaming transport (the default) on a wal_level=logical PostgreSQL
// (LOGICAL_DATABASE_URL): what the conformance suite cannot see from the port — the slot's
// confirmed_flush_lsn moves only on confirm, the lease is the walsender (a killed one frees the
// slot for a standby), a slot streamed by someone else is not taken, and backpressure.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { LogSource, type LogSourceError } from "@effect-outbox/core/LogSource"
import type { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { Transactor } from "@effect-outbox/core/Transactor"
import { acquired, commit, eventId, readAtLeast } from "@effect-outbox/testing/LogSourceSuite"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import pg from "pg"
import * as Support from "./faults/support.ts"

const message = (n: number, pad = 0): LogMessage => {
  const id: EventId = eventId()
  return {
    id,
    topic: "orders",
    key: `k${n % 5}`,
    partition: null,
    headers: { "event-id": id },
    payload: new Uint8Array(pad).fill(n % 251),
    createdAt: Date.now()
  }
}

// Each test's event table in a schema of its own (named after its slot), set up and dropped with it.
const layerFor = (slot: string, options: PgLogSource.Options = {}) => {
  const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 4 })
  const setup = Layer.effectDiscard(
    Effect.andThen(
      PgLogOutbox.setup({ slot, schema: slot }),
      Effect.addFinalizer(() =>
        Effect.ignore(
          Effect.andThen(
            PgLogSource.dropSlot({ slot }),
            Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS ${slot} CASCADE`))
          )
        )
      )
    )
  )
  return Layer.mergeAll(
    PgLogSource.layer({ slot, schema: slot, ...options }),
    PgLogSource.layerWriter({ slot, schema: slot }),
    PgTransactor.layer
  ).pipe(Layer.provideMerge(setup), Layer.provideMerge(client))
}

type Services = LogSource | LogWriter | Transactor | SqlClient.SqlClient | Scope.Scope

const test = (title: string, body: (slot: string) => Effect.Effect<unknown, unknown, Services>, options = {}) =>
  it.live(
    title,
    () => {
      const slot = Support.uniqueName("log_stream").toLowerCase()
      return Effect.provide(Effect.scoped(body(slot)), layerFor(slot, options))
    },
    60_000
  )

const slotRow = (slot: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql.unsafe<{ confirmed: string; pid: number | null; backend: string | null }>(
      `SELECT s.confirmed_flush_lsn::text AS confirmed, s.active_pid AS pid, a.backend_type AS backend
         FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1`,
      [slot]
    )
  ).pipe(Effect.map((rows) => rows[0]!))

const waitFor = <A, R>(probe: Effect.Effect<A, unknown, R>, ok: (a: A) => boolean, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    let value = yield* probe
    while (!ok(value)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep(Duration.millis(50))
      value = yield* probe
    }
    return value
  })

describe("PgLogSource streaming transport", () => {
  test("the slot's confirmed_flush_lsn moves to upTo when confirm is called, and not before", (slot) =>
    Effect.gen(function* () {
      const lease = yield* acquired
      const streaming = yield* slotRow(slot)
      assert.strictEqual(streaming.backend, "walsender", "the slot is held by a replication connection")
      const before = streaming.confirmed
      yield* commit([[message(1)], [message(2), message(3)]])
      const window = yield* readAtLeast(lease, 3)
      assert.strictEqual(window.entries.length, 3)
      // Read, the periodic status updates and keepalive replies go on: nothing confirmed yet.
      yield* Effect.sleep(Duration.millis(1_500))
      assert.strictEqual((yield* slotRow(slot)).confirmed, before)
      yield* lease.confirm(window.upTo!)
      const after = yield* waitFor(slotRow(slot), (row) => row.confirmed === window.upTo, "confirmed_flush_lsn")
      assert.strictEqual(after.confirmed, window.upTo)
      assert.deepStrictEqual((yield* lease.read(100)).entries, [])
    }))

  test("a standby's try while the lease is held opens no replication connection: it asks the pool first", (slot) =>
    Effect.gen(function* () {
      const source = yield* LogSource
      // A standby whose replication connection could never open (nothing listens on port 1):
      // its acquire fails with a connection error whenever it tries to connect.
      const standby = yield* PgLogSource.make({
        slot,
        schema: slot,
        replicationUrl: "postgres://postgres@127.0.0.1:1/postgres"
      })
      const holderScope = yield* Scope.make()
      Option.getOrThrow(yield* source.acquire.pipe(Scope.provide(holderScope)))
      assert.isTrue(Option.isNone(yield* Effect.scoped(standby.acquire)), "held by a walsender: None, not connecting")
      yield* Scope.close(holderScope, Exit.void)
      // The SQL transport's holder (the lease lock, no walsender) is seen too.
      const locked = yield* Effect.scoped(
        Effect.gen(function* () {
          const sqlSource = yield* PgLogSource.make({ slot, schema: slot, transport: "sql" })
          const lease = yield* waitFor(sqlSource.acquire, Option.isSome, "the SQL transport to take the lease")
          assert.isTrue(Option.isSome(lease))
          return yield* Effect.scoped(standby.acquire)
        })
      )
      assert.isTrue(Option.isNone(locked), "held by the lease lock: None, not connecting")
      // Free: the standby tries to connect (and here fails, its connection refused).
      const error = yield* waitFor(
        Effect.flip(Effect.scoped(standby.acquire)).pipe(Effect.option),
        Option.isSome,
        "the standby to try a connection"
      )
      assert.include(Option.getOrThrow(error).message.toLowerCase(), "connect")
    }))

  test("a second acquire gets None while a walsender holds the slot; when the holder's walsender is terminated its reads fail (retriable) and a standby takes the slot", (slot) =>
    Effect.gen(function* () {
      const source = yield* LogSource
      const events = [[message(1)], [message(2)]]
      yield* commit(events)
      const holderScope = yield* Scope.make()
      const holder = Option.getOrThrow(yield* source.acquire.pipe(Scope.provide(holderScope)))
      assert.strictEqual((yield* readAtLeast(holder, 2)).entries.length, 2)
      assert.isTrue(Option.isNone(yield* Effect.scoped(source.acquire)))
      // The SQL transport takes the same advisory lock: it is excluded too.
      const { pid } = yield* slotRow(slot)
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`SELECT pg_terminate_backend($1)`, [pid])
      const error: LogSourceError = yield* waitFor(
        Effect.flip(holder.read(100)).pipe(Effect.timeout(Duration.seconds(1)), Effect.option),
        Option.isSome,
        "the holder's read to fail"
      ).pipe(Effect.map(Option.getOrThrow))
      assert.isTrue(error.retriable, error.message)
      const standby = yield* waitFor(
        Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* source.acquire
            if (Option.isNone(lease)) return undefined
            return (yield* readAtLeast(lease.value, 2)).entries.map((m) => m.id)
          })
        ),
        (ids) => ids !== undefined,
        "a standby to take the slot"
      )
      // Nothing was confirmed: the standby gets the events again from the slot.
      assert.deepStrictEqual(
        standby,
        events.flat().map((m) => m.id)
      )
      yield* Scope.close(holderScope, Exit.void)
    }))

  test("a slot another client streams (no advisory lock) is not taken: acquire gets None", (slot) =>
    Effect.gen(function* () {
      // Build the layer (creates the slot), then stream it with a plain replication client.
      yield* LogSource
      const other = new pg.Client({ connectionString: Support.logicalDatabaseUrl, replication: "database" } as never)
      other.on("error", () => undefined)
      yield* Effect.promise(() => other.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => other.end().catch(() => undefined)))
      const started = new Promise<void>((resolve) =>
        (other as unknown as { connection: NodeJS.EventEmitter }).connection.once("replicationStart", () => resolve())
      )
      other
        .query(
          `START_REPLICATION SLOT ${slot} LOGICAL 0/0 (proto_version '1', publication_names '${slot}', messages 'true')`
        )
        .catch(() => undefined)
      yield* Effect.promise(() => started)
      const source = yield* LogSource
      assert.isTrue(Option.isNone(yield* Effect.scoped(source.acquire)))
    }))

  test(
    "backpressure: past maxBufferedBytes of unconfirmed transactions the stream pauses; confirms drain it and it resumes, losing nothing",
    () =>
      Effect.gen(function* () {
        const lease = yield* acquired
        // 300 transactions of one ~2 KB event: ~600 KB against a 64 KB buffer.
        const events = Array.from({ length: 300 }, (_, i) => message(i, 2_000))
        yield* commit(events.map((e) => [e]))
        yield* Effect.sleep(Duration.millis(1_500)) // everything the stream would take has arrived
        const first = yield* lease.read(100_000)
        assert.isAbove(first.entries.length, 0)
        assert.isBelow(first.entries.length, 150, "the stream paused well before the whole backlog")
        const seen: Array<string> = []
        let window = first
        const deadline = Date.now() + 20_000
        while (seen.length < events.length && Date.now() < deadline) {
          seen.push(...window.entries.map((m) => m.id))
          if (window.upTo !== null) yield* lease.confirm(window.upTo)
          yield* lease.awaitMore!(Duration.seconds(1))
          window = yield* lease.read(100_000)
        }
        assert.deepStrictEqual(
          seen,
          events.map((m) => m.id)
        )
      }),
    { maxBufferedBytes: 64 * 1024 }
  )
})
