// `Inbox.processOnce` on the real database, one transaction per message: the record and the
// handler's write commit together, a redelivery never runs the handler, a concurrent duplicate
// waits on the first one's record, and what goes over the wire per message (counted on the
// client's own sockets) is the handler's statements plus BEGIN, the record and COMMIT.
import * as Net from "node:net"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Inbox from "@effect-outbox/core/Inbox"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import { databaseUrl, freshTables } from "./support.ts"

/**
 * Extended-query cycles sent to PostgreSQL: each ends with a `Sync` and waits for its
 * `ReadyForQuery`, so one cycle is one round trip. Counted from the frontend messages this
 * client writes (type byte, int32 length that counts itself, body); startup packets start with 0.
 */
const wire = { counting: false, cycles: 0 }
const countCycles = (chunk: Uint8Array) => {
  if (!wire.counting || chunk.length === 0 || chunk[0] === 0) return
  const view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  for (let at = 0; at + 5 <= view.length; at += 1 + view.readInt32BE(at + 1)) {
    if (view[at] === 0x53) wire.cycles++ // 'S': Sync
  }
}
const countingClient = () => {
  const url = new URL(databaseUrl)
  return PgClient.layer({
    host: url.hostname,
    port: Number(url.port || 5432),
    database: url.pathname.slice(1) || "postgres",
    username: decodeURIComponent(url.username || "postgres"),
    ssl: false,
    maxConnections: 4,
    applicationName: "effect-outbox-inbox-roundtrips-test",
    stream: () => {
      const socket = Net.connect({ host: url.hostname, port: Number(url.port || 5432), noDelay: true })
      const write = socket.write.bind(socket) as (...args: Array<unknown>) => boolean
      socket.write = ((chunk: unknown, ...rest: Array<unknown>) => {
        if (chunk instanceof Uint8Array) countCycles(chunk)
        return write(chunk, ...rest)
      }) as typeof socket.write
      return socket
    }
  })
}

/** Round trips `effect` costs. */
const cyclesOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      wire.cycles = 0
      wire.counting = true
    }),
    () => Effect.map(effect, (a) => [a, wire.cycles] as const),
    () =>
      Effect.sync(() => {
        wire.counting = false
      })
  )

const Live = Inbox.Inbox.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(PgInboxStore.layer, PgTransactor.layer)),
  Layer.provideMerge(freshTables()),
  Layer.provideMerge(countingClient())
)

/** An `orders` table in the test's schema, the write a handler does and a count of its rows. */
const orders = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  const table = `"${t.schema}"."orders"`
  yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS ${table} (id text PRIMARY KEY)`).unprepared
  return {
    write: (id: string) => sql`INSERT INTO ${sql.literal(table)} (id) VALUES (${id})`,
    count: sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(table)}`.pipe(
      Effect.map((rows) => rows[0]!.n)
    )
  }
})
const key = (identity: string) => ({ consumer: "billing", identity: `event:${identity}` })

describe("Inbox.processOnce on PostgreSQL", () => {
  it.effect("first delivery runs the handler and commits its write with the record; a redelivery runs nothing", () =>
    Effect.gen(function* () {
      const { write, count } = yield* orders
      const store = yield* InboxStore
      const runs = yield* Ref.make(0)
      const handler = Effect.andThen(
        Ref.update(runs, (n) => n + 1),
        write("o-1")
      )
      assert.strictEqual(yield* Inbox.processOnce(key("e1"), handler), "processed")
      assert.isTrue(yield* store.exists(key("e1")))
      // the redelivery would fail on the order's primary key if its handler ran
      assert.strictEqual(yield* Inbox.processOnce(key("e1"), handler), "already_processed")
      assert.strictEqual(yield* Ref.get(runs), 1)
      assert.strictEqual(yield* count, 1)
    }).pipe(Effect.provide(Live))
  )

  it.effect("a failing handler rolls back its write and the record; the retry runs it", () =>
    Effect.gen(function* () {
      const { write, count } = yield* orders
      const store = yield* InboxStore
      const error = yield* Effect.flip(
        Inbox.processOnce(key("e2"), Effect.andThen(write("o-2"), Effect.fail("handler failed" as const)))
      )
      assert.strictEqual(error, "handler failed")
      assert.isFalse(yield* store.exists(key("e2")))
      assert.strictEqual(yield* count, 0)
      assert.strictEqual(yield* Inbox.processOnce(key("e2"), write("o-2")), "processed")
      assert.strictEqual(yield* count, 1)
    }).pipe(Effect.provide(Live))
  )

  it.live("two concurrent deliveries of one key run the handler once: the second waits on the first's record", () =>
    Effect.gen(function* () {
      const { write, count } = yield* orders
      const race = (identity: string, firstCommits: boolean) =>
        Effect.gen(function* () {
          const runs = yield* Ref.make(0)
          const inside = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const first = yield* Effect.forkChild(
            Effect.exit(
              Inbox.processOnce(
                key(identity),
                Effect.gen(function* () {
                  yield* Ref.update(runs, (n) => n + 1)
                  yield* write(`${identity}-first`)
                  yield* Deferred.succeed(inside, undefined)
                  yield* Deferred.await(release)
                  if (!firstCommits) return yield* Effect.fail("first failed" as const)
                })
              )
            )
          )
          yield* Deferred.await(inside)
          const second = yield* Effect.forkChild(
            Inbox.processOnce(
              key(identity),
              Effect.andThen(
                Ref.update(runs, (n) => n + 1),
                write(`${identity}-second`)
              )
            )
          )
          yield* Effect.sleep("150 millis")
          assert.isUndefined(second.pollUnsafe(), "the second delivery waits on the first one's record")
          assert.strictEqual(yield* Ref.get(runs), 1, "and has not run its handler")
          yield* Deferred.succeed(release, undefined)
          const firstExit = yield* Fiber.join(first)
          return { first: firstExit._tag, second: yield* Fiber.join(second), runs: yield* Ref.get(runs) }
        })
      assert.deepStrictEqual(yield* race("e3", true), { first: "Success", second: "already_processed", runs: 1 })
      // the first rolls back: its record goes with it, so the waiting delivery records and runs
      assert.deepStrictEqual(yield* race("e4", false), { first: "Failure", second: "processed", runs: 2 })
      assert.strictEqual(yield* count, 2) // e3-first, e4-second
    }).pipe(Effect.provide(Live))
  )

  it.effect(
    "round trips: the handler's statements + BEGIN, the record and COMMIT; a duplicate runs none of the handler's",
    () =>
      Effect.gen(function* () {
        const { write } = yield* orders
        const transactor = yield* Transactor
        const sql = yield* SqlClient.SqlClient
        // warm: every statement prepared once, so the counts below are the steady state
        yield* Inbox.processOnce(key("warm"), write("warm"))
        yield* transactor.withTransaction(write("warm-2"))

        const [, baseline] = yield* cyclesOf(transactor.withTransaction(write("b-1")))
        const [outcome, once] = yield* cyclesOf(Inbox.processOnce(key("e5"), write("o-5")))
        const [again, duplicate] = yield* cyclesOf(Inbox.processOnce(key("e5"), write("o-5")))
        assert.strictEqual(baseline, 3) // BEGIN, INSERT, COMMIT
        assert.strictEqual(outcome, "processed")
        assert.strictEqual(once, baseline + 1) // + the record: nothing else (no read, no savepoint)
        assert.strictEqual(again, "already_processed")
        assert.strictEqual(duplicate, 3) // BEGIN, the record that finds the key, COMMIT

        // joined to the caller's transaction: the record is the only statement it adds
        const [, outer] = yield* cyclesOf(sql.withTransaction(write("b-2")))
        const [, joined] = yield* cyclesOf(sql.withTransaction(Inbox.processOnce(key("e6"), write("o-6"))))
        assert.strictEqual(joined, outer + 1)
      }).pipe(Effect.provide(Live))
  )

  it.effect("the driver cannot carry the record with BEGIN: one cycle holds one statement", () =>
    // Why the record costs a round trip of its own (docs/performance.md, scenario 4): @effect/sql-pg
    // sends every statement, BEGIN included, as an extended-protocol cycle (Parse/Bind/Execute/Sync),
    // which PostgreSQL refuses to give two commands, and it does not pipeline the statements of a
    // transaction. If this starts to pass, the record can travel with BEGIN.
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const error = yield* Effect.flip(
        sql
          .withTransaction(sql`SELECT 1 AS one`)
          .pipe(Effect.provideService(SqlClient.BeginTransaction, "BEGIN; SELECT 1"))
      )
      assert.strictEqual((error.reason.cause as { readonly code?: string }).code, "42601")
    }).pipe(Effect.provide(Live))
  )
})
