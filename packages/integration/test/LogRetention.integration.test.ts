// PgLogRetention's rules on the private logical PostgreSQL (LOGICAL_DATABASE_URL), without Kafka:
// a partition is dropped only once it is past retention AND the slot has confirmed past its seal;
// with no slot nothing is dropped; the writer's refusals (an id outside every partition) say why.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogRetention from "@effect-outbox/adapter-pg/PgLogRetention"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import { LogSource } from "@effect-outbox/core/LogSource"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Transactor } from "@effect-outbox/core/Transactor"
import { eventId, readAtLeast } from "@effect-outbox/testing/LogSourceSuite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const layerFor = (slot: string) => {
  const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 3 })
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
    PgLogSource.layer({ slot, schema: slot, transport: "sql" }),
    PgLogSource.layerWriter({ slot, schema: slot }),
    PgTransactor.layer
  ).pipe(Layer.provideMerge(setup), Layer.provideMerge(client))
}

const query = <A extends object>(text: string) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text))

const partitions = (slot: string) =>
  query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = '${slot}.outbox_log_event'::regclass ORDER BY 1`
  ).pipe(Effect.map((rows) => rows.map((r) => r.name)))

const emit = (n: number) =>
  Effect.gen(function* () {
    const writer = yield* LogWriter
    const transactor = yield* Transactor
    const ids = Array.from({ length: n }, () => eventId())
    yield* transactor.withTransaction(
      writer.emit(
        ids.map((id) => ({
          id,
          topic: "orders",
          key: "k",
          partition: null,
          headers: { "event-id": id },
          payload: new Uint8Array([1]),
          createdAt: Date.now()
        }))
      )
    )
    return ids
  })

type Services = LogSource | LogWriter | Transactor | SqlClient.SqlClient | Scope.Scope

const test = (title: string, body: (slot: string) => Effect.Effect<unknown, unknown, Services>) =>
  it.live(
    title,
    () => {
      const slot = Support.uniqueName("log_retention").toLowerCase()
      return Effect.provide(Effect.scoped(body(slot)), layerFor(slot))
    },
    60_000
  )

describe("PgLogRetention", () => {
  test("a partition past retention is kept while the slot has not confirmed its events, and while there is no slot; dropped once confirmed", (slot) =>
    Effect.gen(function* () {
      const options: PgLogRetention.Options = {
        slot,
        schema: slot,
        partitionSpan: "1 second",
        ahead: "3 seconds",
        sealAfter: "200 millis",
        retention: "200 millis"
      }
      // Start from short partitions only (the migration's are an hour long).
      for (const name of yield* partitions(slot)) yield* query(`DROP TABLE ${slot}.${name}`)
      yield* PgLogRetention.maintain(options)
      const first = yield* partitions(slot)
      const ids = yield* emit(5)
      yield* Effect.sleep("2500 millis")
      // Sealed and past retention, but nothing confirmed: kept.
      const unconfirmed = yield* PgLogRetention.maintain(options)
      assert.isAbove(unconfirmed.sealed.length, 0)
      assert.deepStrictEqual(unconfirmed.dropped, [])
      const [held] = yield* query<{ n: number }>(`SELECT count(*)::int AS n FROM ${slot}.outbox_log_event`)
      assert.strictEqual(held?.n, 5)
      // No slot at all: kept too (the table is the backstop of a lost slot).
      const noSlot = yield* PgLogRetention.maintain({ ...options, slot: `${slot}_none` })
      assert.deepStrictEqual(noSlot.dropped, [])
      // Confirmed past the seals (the seal is a WAL position after the partition's last commit:
      // a later event's confirm passes it): the partitions that held them go, whole.
      const later = yield* emit(1)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const lease = Option.getOrThrow(yield* (yield* LogSource).acquire)
          const window = yield* readAtLeast(lease, 6)
          assert.deepStrictEqual(
            window.entries.map((e) => e.id),
            [...ids, ...later]
          )
          yield* lease.confirm(window.upTo!)
        })
      )
      // Three processes' rounds at once: none fails, each partition is dropped by one of them.
      const rounds = yield* Effect.all(
        [PgLogRetention.maintain(options), PgLogRetention.maintain(options), PgLogRetention.maintain(options)],
        { concurrency: "unbounded" }
      )
      const again = yield* PgLogRetention.maintain(options)
      const dropped = [...rounds, again].flatMap((r) => r.dropped)
      assert.isAbove(dropped.length, 0)
      assert.strictEqual(new Set(dropped).size, dropped.length, "no partition dropped twice")
      for (const name of dropped) assert.include(first, name)
      const [left] = yield* query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${slot}.outbox_log_event WHERE id = ANY('{${ids.join(",")}}'::uuid[])`
      )
      assert.strictEqual(left?.n, 0, "the five events' partition was dropped")
      const [seals] = yield* query<{ n: number }>(`SELECT count(*)::int AS n FROM ${slot}.outbox_log_partition`)
      const attached = yield* partitions(slot)
      assert.isAtMost(seals?.n ?? 0, attached.length, "the seals of dropped partitions are gone with them")
    }))

  test("an event id outside every partition is refused with a reason the writer can act on", (slot) =>
    Effect.gen(function* () {
      const writer = yield* LogWriter
      const id = "00000000-0000-4000-8000-000000000001" as EventId
      const error = yield* Effect.flip(
        writer.emit([
          { id, topic: "orders", key: null, partition: null, headers: {}, payload: new Uint8Array(0), createdAt: 0 }
        ])
      )
      assert.isFalse(error.retriable)
      assert.include(error.reason, `no partition of "${slot}"."outbox_log_event" holds event ${id}`)
      assert.include(error.reason, "UUIDv7")
    }))

  test("readTable reads events back from the table by time, in id order, paged, validated like the slot's", (slot) =>
    Effect.gen(function* () {
      const started = Date.now()
      const ids = [...(yield* emit(2)), ...(yield* emit(1))]
      const forged = eventId()
      yield* query(`INSERT INTO ${slot}.outbox_log_event (id, record) VALUES ('${forged}', '\\x0102')`)
      const range = { slot, schema: slot, from: started - 1_000, to: Date.now() + 1_000 }
      const all = yield* PgLogSource.readTable(range)
      assert.deepStrictEqual(
        all.map((e) => e.id),
        [...ids, forged].sort()
      )
      assert.deepStrictEqual(
        all.filter((e) => e.invalid !== undefined).map((e) => e.id),
        [forged]
      )
      const first = yield* PgLogSource.readTable({ ...range, limit: 2 })
      const rest = yield* PgLogSource.readTable({ ...range, after: first[1]!.id })
      assert.deepStrictEqual(
        [...first, ...rest].map((e) => e.id),
        all.map((e) => e.id)
      )
      assert.deepStrictEqual(
        yield* PgLogSource.readTable({ ...range, from: started - 60_000, to: started - 1_000 }),
        []
      )
    }))

  test("settings that cannot work are refused before anything runs", (slot) =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(PgLogRetention.maintain({ slot, schema: slot, partitionSpan: "10 millis" }))
      assert.include(error.reason, "partitionSpan must be at least 1 second")
      const ahead = yield* Effect.flip(
        PgLogRetention.maintain({ slot, schema: slot, partitionSpan: "2 hours", ahead: "1 hour" })
      )
      assert.include(ahead.reason, "ahead at least one span")
    }))
})
