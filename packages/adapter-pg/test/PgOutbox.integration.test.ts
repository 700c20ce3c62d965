// The all-in-one layer with core's Outbox and Relay: an event enqueued in the caller's
// transaction reaches the broker through a LISTEN wake-up, long before the poll interval.
import { assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Relay from "@effect-outbox/core/Relay"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutbox from "../src/PgOutbox.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const schema = freshSchema()
const DropSchema = Layer.effectDiscard(
  Effect.addFinalizer(() =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )
)

const Live = Layer.mergeAll(
  Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(Layer.provideMerge(PgOutbox.layer({ schema }))),
  InMemoryBroker.layer({ topics: { orders: 3 } }),
  DropSchema
).pipe(Layer.provideMerge(pgClient(6)))

const waitFor = <A, E, R>(probe: Effect.Effect<A, E, R>, done: (a: A) => boolean, millis: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + millis
    for (;;) {
      const value = yield* probe
      if (done(value) || Date.now() > deadline) return value
      yield* Effect.sleep("20 millis")
    }
  })

describe("PgOutbox.layer with the core relay", () => {
  it.live(
    "a committed enqueue is published within a second although the relay polls every 30 s",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* Relay.start({ owner: "relay-1", pollInterval: Duration.seconds(30) })
        yield* Effect.sleep("500 millis") // the relay's first look finds nothing, then it waits

        // rolled back: nothing is stored, nothing is published
        yield* Effect.flip(
          Outbox.withTransaction(
            Outbox.enqueue({ topic: "orders", key: "user-1", payload: jsonPayload({ n: 0 }) }).pipe(
              Effect.andThen(Effect.fail("no"))
            )
          )
        )
        const started = Date.now()
        const id = yield* Outbox.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT 1` // the caller's own state change would go here
            return yield* Outbox.enqueue({ topic: "orders", key: "user-1", payload: jsonPayload({ n: 1 }) })
          })
        )
        const records = yield* waitFor(broker.records("orders"), (r) => r.length > 0, 5_000)
        const latency = Date.now() - started
        assert.strictEqual(records.length, 1)
        assert.strictEqual(records[0]!.headers["event-id"], id)
        assert.isBelow(latency, 1_500, `published after ${latency} ms`)
        const row = yield* waitFor(store.get(id), (r) => Option.isSome(r) && r.value.status === "PUBLISHED", 2_000)
        const stored = Option.getOrThrow(row)
        assert.strictEqual(stored.status, "PUBLISHED")
        assert.deepStrictEqual(stored.receipt, {
          topic: "orders",
          partition: records[0]!.partition,
          offset: records[0]!.offset
        })
        const stats = yield* store.stats(Date.now())
        assert.deepStrictEqual(stats.byStatus, { PUBLISHED: 1 })
      }).pipe(Effect.scoped, Effect.provide(Live)),
    30_000
  )
  it.live(
    "four relays in one process share ONE LISTEN connection; a wake-up still publishes at once (M6)",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables.PgTables
        for (const owner of ["relay-a", "relay-b", "relay-c", "relay-d"]) {
          yield* Relay.start({ owner, pollInterval: Duration.seconds(30) })
        }
        yield* Effect.sleep("500 millis")
        const listening = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE query = ${`LISTEN "${t.channel}"`} AND pid <> pg_backend_pid()`
        assert.strictEqual(listening[0]!.n, 1)
        yield* Outbox.withTransaction(
          Outbox.enqueue(
            ["k1", "k2", "k3", "k4"].map((key, n) => ({ topic: "orders", key, payload: jsonPayload({ n }) }))
          )
        )
        const records = yield* waitFor(broker.records("orders"), (r) => r.length === 4, 5_000)
        assert.strictEqual(records.length, 4, "published on the wake-up, long before the 30 s poll")
      }).pipe(Effect.scoped, Effect.provide(Live)),
    30_000
  )
})
