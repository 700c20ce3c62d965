// The inbox on the real database keeps its records in partitions by the record's time and
// forgets whole partitions: created ahead, dropped once they ended before the retention's cut-off,
// never a row deleted (pg_stat_user_tables n_tup_del stays 0). What it no longer remembers is
// refused as "expired"; what it remembers is deduplicated. Migration 12 upgrades an inbox that
// has records in it.
import { assert, describe, it } from "@effect/vitest"
import * as Inbox from "@effect-outbox/core/Inbox"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import { freshSchema, freshTables, pgClient } from "./support.ts"

const DAY = 24 * 60 * 60 * 1000
/** A UUIDv7 `event:` identity of time `ms`. */
const eventAt = (ms: number, n: number) => {
  const hex = ms.toString(16).padStart(12, "0")
  return `event:${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-${n.toString(16).padStart(12, "0")}`
}

interface PartitionStats {
  readonly name: string
  readonly from: string
  readonly inserted: number
  readonly deleted: number
}

/** The inbox's partitions in bound order, with their statistics (flushed by the backends). */
const partitions = (t: PgTables.Tables) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.andThen(
      sql`SELECT pg_stat_clear_snapshot()`,
      sql<PartitionStats>`SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS "from",
          coalesce(s.n_tup_ins, 0)::int AS inserted, coalesce(s.n_tup_del, 0)::int AS deleted
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
       WHERE i.inhparent = ${t.processed}::regclass`.withoutTransform
    )
  ).pipe(Effect.map((rows) => [...rows].sort((a, b) => a.name.localeCompare(b.name))))

/** Waits (no sleep-and-hope: polls the statistics) until the partitions' inserts are visible. */
const statsShow = (t: PgTables.Tables, inserted: number) =>
  Effect.gen(function* () {
    for (let i = 0; i < 150; i++) {
      const rows = yield* partitions(t)
      if (rows.reduce((n, p) => n + p.inserted, 0) >= inserted) return rows
      yield* Effect.sleep("100 millis")
    }
    return assert.fail(`the statistics never showed ${inserted} inserts`)
  })

const Stores = Layer.mergeAll(PgInboxStore.layer, PgTransactor.layer)
const withTables = <A, E, R>(use: (t: PgTables.Tables) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(PgTables.PgTables, use)

describe("PgInboxStore: retention by partitions", () => {
  // Live clock: the statistics reach the shared view on the server's own schedule.
  it.live("partitions are created ahead and dropped whole; no record is ever deleted", () =>
    withTables((t) =>
      Effect.gen(function* () {
        const store = yield* InboxStore
        const now = Date.now()
        // The migration made: the partition of everything before yesterday, yesterday, today and
        // two days ahead.
        const made = yield* partitions(t)
        assert.include(
          made.map((p) => p.name),
          `${t.tablePrefix}inbox_before`
        )
        assert.isAtLeast(made.length, 4)
        const times = [now - 10 * DAY, now - DAY, now, now + DAY]
        const keys = times.flatMap((at, d) =>
          Array.from({ length: 50 }, (_, i) => ({ consumer: "billing", identity: eventAt(at, d * 100 + i) }))
        )
        assert.isTrue((yield* store.recordBatch(keys, now)).every((o) => o === "recorded"))
        const before = yield* statsShow(t, keys.length)
        assert.deepStrictEqual(
          before.filter((p) => p.deleted > 0),
          []
        )

        // Everything that ended by now + 1 day: the older partitions and today's.
        const forgotten = yield* store.purge(now + DAY, 1)
        assert.strictEqual(forgotten, 150)
        const after = yield* partitions(t)
        const names = after.map((p) => p.name)
        assert.notInclude(names, `${t.tablePrefix}inbox_before`)
        assert.isBelow(after.length, before.length)
        // The partition of tomorrow's records stays, with all 50, and ones ahead of it exist.
        const sql = yield* SqlClient.SqlClient
        const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(t.processed)}`
        assert.strictEqual(left!.n, 50)
        const [ahead] = yield* sql<{ to: string }>`SELECT max((regexp_match(pg_get_expr(c.relpartbound, c.oid),
            'TO \\(''?(-?[0-9]+)''?\\)'))[1]::bigint)::text AS "to"
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = ${t.processed}::regclass`
        assert.isAtLeast(Number(ahead!.to), now + 2 * DAY)
        // Dropped, not deleted: no partition ever counted a deleted row, and the parent neither.
        assert.deepStrictEqual(
          after.filter((p) => p.deleted > 0),
          []
        )
        const [parent] = yield* sql<{ deleted: number | null }>`SELECT n_tup_del::int AS deleted
          FROM pg_stat_user_tables WHERE relid = ${t.processed}::regclass`
        assert.strictEqual(parent?.deleted ?? 0, 0)
        assert.isAtMost(yield* store.horizon, now + DAY)
        assert.isAbove(yield* store.horizon, now)
      })
    ).pipe(Effect.provide(Stores.pipe(Layer.provideMerge(freshTables()))), Effect.provide(pgClient()))
  )

  it.effect("Inbox on PostgreSQL: a redelivery inside the window is deduplicated, one older is expired", () =>
    withTables(() =>
      Effect.gen(function* () {
        const store = yield* InboxStore
        const runs = yield* Ref.make<ReadonlyArray<string>>([])
        const work = (name: string) => Ref.update(runs, (all) => [...all, name])
        const now = Date.now()
        const old = { consumer: "billing", identity: eventAt(now - 10 * DAY, 1) }
        const recent = { consumer: "billing", identity: eventAt(now, 2) }
        assert.strictEqual(yield* Inbox.processOnce(old, work("old")), "processed")
        assert.strictEqual(yield* Inbox.processOnce(recent, work("recent")), "processed")
        // A retention of one day at most: the ten-day-old record's partition goes.
        assert.strictEqual(yield* store.purge(now - DAY, 1000), 1)
        assert.strictEqual(yield* Inbox.processOnce(recent, work("recent again")), "already_processed")
        assert.strictEqual(yield* Inbox.processOnce(old, work("old again")), "expired")
        const batch = yield* Inbox.processBatch(
          [
            { key: recent, work: work("recent in a batch") },
            { key: old, work: work("old in a batch") }
          ],
          { stopAtFailure: true }
        )
        assert.deepStrictEqual(
          batch.map((exit) => (exit._tag === "Success" ? exit.value : "failed")),
          ["already_processed", "expired"]
        )
        assert.deepStrictEqual(yield* Ref.get(runs), ["old", "recent"])
      })
    ).pipe(
      Effect.provide(Inbox.Inbox.layer.pipe(Layer.provideMerge(Stores), Layer.provideMerge(freshTables()))),
      Effect.provide(pgClient())
    )
  )
})

describe("PgInboxStore: a record it cannot place", () => {
  it.effect("beyond the partitions ahead: fails retriable, naming what creates them; a round creates them", () =>
    Effect.gen(function* () {
      const store = yield* InboxStore
      const now = Date.now()
      const far = { consumer: "billing", identity: eventAt(now + 5 * DAY, 1) }
      const error = yield* Effect.flip(store.record(far, now))
      assert.strictEqual(error.retriable, true)
      assert.include(error.reason, "no inbox partition for this record's time")
      const batchError = yield* Effect.flip(store.recordBatch([far], now))
      assert.strictEqual(batchError.retriable, true)
      // Partitions are created from the current time: five days ahead needs a longer reach.
      const wide = yield* PgInboxStore.makeWith({ ahead: "6 days" })
      assert.strictEqual(yield* wide.purge(Number.NEGATIVE_INFINITY, 1), 0)
      assert.strictEqual(yield* store.record(far, now), "recorded")
      // Without the horizon row nothing can be recorded; that is an error, never a "duplicate".
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      yield* sql`DELETE FROM ${sql.literal(t.inboxHorizon)}`
      const missing = yield* Effect.flip(store.record({ consumer: "billing", identity: eventAt(now, 2) }, now))
      assert.include(missing.reason, "inbox horizon row is missing")
      assert.strictEqual(missing.retriable, false)
      const missingBatch = yield* Effect.flip(
        store.recordBatch([{ consumer: "billing", identity: eventAt(now, 3) }], now)
      )
      assert.include(missingBatch.reason, "inbox horizon row is missing")
    }).pipe(
      Effect.provide(Layer.mergeAll(PgInboxStore.layer, PgTransactor.layer).pipe(Layer.provideMerge(freshTables()))),
      Effect.provide(pgClient())
    )
  )
})

describe("PgMigrations 12: an inbox with records upgrades in place", () => {
  it.effect("records written at migration 11 are kept at their event's time and still deduplicate", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const schema = freshSchema()
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
      const t = yield* PgTables.make({ schema })
      yield* sql.unsafe(`CREATE SCHEMA "${schema}"`).unprepared
      const all = PgMigrations.migrations(t)
      const upTo11 = Object.fromEntries(Object.entries(all).filter(([name]) => Number(name.split("_")[0]) <= 11))
      const applied = yield* Migrator.make({})({ loader: Migrator.fromRecord(upTo11), table: t.migrations })
      assert.strictEqual(applied.length, 11)

      // At migration 11 the inbox is one table keyed by (consumer, identity).
      const now = Date.now()
      const v7 = eventAt(now - 3 * DAY, 7)
      const processedAt = new Date(now - 2 * DAY)
      const rows = [
        ["billing", v7],
        ["billing", "offset:orders/0/41"],
        ["shipping", v7],
        ["billing", eventAt(now - 40 * DAY, 8)]
      ]
      for (const [consumer, identity] of rows) {
        yield* sql`INSERT INTO ${sql.literal(t.processed)} (consumer, identity, processed_at)
          VALUES (${consumer!}, ${identity!}, ${processedAt})`
      }

      const upgraded = yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, t))
      assert.deepStrictEqual(upgraded, [
        [12, "inbox_partitions"],
        [13, "log_part"],
        [14, "claimed_payload"],
        [15, "claim_first_rows"],
        [16, "claim_windows"],
        [17, "waiting_keys"]
      ])
      const kept = yield* sql<{ consumer: string; identity: string; event_ms: string }>`
        SELECT consumer, identity, event_ms::text FROM ${sql.literal(t.processed)} ORDER BY consumer, identity`
      assert.deepStrictEqual(
        kept.map((r) => [r.consumer, r.identity, Number(r.event_ms)]),
        [
          ["billing", eventAt(now - 40 * DAY, 8), now - 40 * DAY],
          ["billing", v7, now - 3 * DAY],
          ["billing", "offset:orders/0/41", processedAt.getTime()],
          ["shipping", v7, now - 3 * DAY]
        ]
      )
      const [unpartitioned] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ${schema} AND c.relname = 'outbox_processed_unpartitioned'`
      assert.strictEqual(unpartitioned!.n, 0)

      // The records of before the upgrade still deduplicate: the event at its time, the offset
      // identity at its processing time (its broker timestamp is not known to the old table).
      const store = yield* PgInboxStore.make.pipe(Effect.provideService(PgTables.PgTables, t))
      assert.strictEqual(yield* store.record({ consumer: "billing", identity: v7 }, now), "duplicate")
      assert.strictEqual(
        yield* store.record(
          { consumer: "billing", identity: "offset:orders/0/41", eventTime: processedAt.getTime() },
          now
        ),
        "duplicate"
      )
      assert.strictEqual(yield* store.record({ consumer: "shipping", identity: eventAt(now, 9) }, now), "recorded")
      assert.strictEqual(yield* store.horizon, Number.NEGATIVE_INFINITY)
      // And retention forgets them by whole partitions like any other.
      assert.strictEqual(yield* store.purge(now - 20 * DAY, 1000), 0)
      assert.strictEqual(yield* store.purge(now, 1000), 4)
      assert.strictEqual(yield* store.record({ consumer: "billing", identity: v7 }, now), "expired")
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
