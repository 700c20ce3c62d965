// The migrations: idempotent, safe when several processes start at once, in any schema/prefix.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const dropAfter = (schema: string) =>
  Effect.addFinalizer(() =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )

const tablesIn = (schema: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = ${schema} ORDER BY 1`
  ).pipe(Effect.map((rows) => rows.map((r) => r.name)))

describe("PgMigrations", () => {
  it.effect("creating a schema that did not exist is a warning naming it; an existing one is silent", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      const warnings: Array<string> = []
      const capture = Logger.make((options) => {
        if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
      })
      const migrate = PgMigrations.run.pipe(
        Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })),
        Effect.provide(Logger.layer([capture]))
      )
      yield* migrate
      assert.strictEqual(warnings.length, 1, warnings.join("\n"))
      assert.include(warnings[0]!, `creating the outbox schema "${schema}" in database postgres`)
      assert.include(warnings[0]!, "OUTBOX_SCHEMA")
      yield* migrate
      assert.strictEqual(warnings.length, 1, warnings.join("\n"))
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )

  it.effect("creates the schema and tables once; a second run applies nothing", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      const tables = yield* PgTables.make({ schema })
      const first = yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables))
      assert.deepStrictEqual(first, [
        [1, "tables"],
        [2, "claim_function"],
        [3, "hot_path"],
        [4, "failure_blocks_key"],
        [5, "stale_recovery"],
        [6, "parked"],
        [7, "lifecycle_group"],
        [8, "log_events"],
        [9, "log_progress"],
        [10, "log_quarantine"],
        [11, "log_gap"],
        [12, "inbox_partitions"],
        [13, "log_part"],
        [14, "claimed_payload"],
        [15, "claim_first_rows"],
        [16, "claim_windows"],
        [17, "waiting_keys"]
      ])
      const second = yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables))
      assert.deepStrictEqual(second, [])
      const all = yield* tablesIn(schema)
      // The log engine's event table is partitioned: its first day of hourly partitions exists.
      const partitions = all.filter((name) => /^outbox_log_\d+$/.test(name))
      assert.isAtLeast(partitions.length, 25)
      // The inbox's: everything before yesterday, then a partition a day until two days ahead.
      const inbox = all.filter((name) => /^outbox_inbox_(\d+|before)$/.test(name))
      assert.isAtLeast(inbox.length, 4)
      assert.deepStrictEqual(
        all.filter((name) => !partitions.includes(name) && !inbox.includes(name)),
        [
          "outbox_claimed_payload",
          "outbox_inbox_horizon",
          "outbox_lease",
          "outbox_lifecycle_group",
          "outbox_log_event",
          "outbox_log_partition",
          "outbox_log_progress",
          "outbox_log_quarantine",
          "outbox_message",
          "outbox_migrations",
          "outbox_parked",
          "outbox_parked_release",
          "outbox_partition_assignment",
          "outbox_processed",
          "outbox_transition",
          "outbox_waiting_key"
        ]
      )
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )

  it.effect("six processes migrating at once: each migration applied exactly once, none fails", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      const tables = yield* PgTables.make({ schema })
      const results = yield* Effect.forEach(
        Array.from({ length: 6 }),
        () => PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables)),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(
        results
          .flat()
          .map(([id]) => id)
          .sort((a, b) => a - b),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
      )
    }).pipe(Effect.scoped, Effect.provide(pgClient(8)))
  )

  it.effect("two outboxes live side by side in one schema under different prefixes", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      for (const tablePrefix of ["orders_", "billing_"]) {
        const tables = yield* PgTables.make({ schema, tablePrefix })
        yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables))
      }
      const names = yield* tablesIn(schema)
      assert.includeMembers(names, ["orders_message", "billing_message", "orders_migrations", "billing_migrations"])
      const a = yield* PgTables.make({ schema, tablePrefix: "orders_" })
      const b = yield* PgTables.make({ schema, tablePrefix: "billing_" })
      assert.notStrictEqual(a.channel, b.channel)
      assert.notStrictEqual(a.locks.claimKey, b.locks.claimKey)
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )

  it.effect("the database refuses an unknown status, an empty topic and a negative partition", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const schema = freshSchema()
      yield* dropAfter(schema)
      const t = yield* PgTables.make({ schema })
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, t))
      const insert = (status: string, topic: string, partition: number | null) =>
        sql.unsafe(
          `INSERT INTO ${t.message} (id, topic, partition, payload, status, available_at, created_at, updated_at)
           VALUES (gen_random_uuid(), $1, $2, '\\x00', $3, now(), now(), now())`,
          [topic, partition, status]
        )
      yield* insert("PENDING", "ok", 0)
      for (const bad of [
        ["BOGUS", "ok", 0],
        ["PENDING", "", 0],
        ["PENDING", "ok", -1]
      ] as const) {
        const error = yield* Effect.flip(insert(bad[0], bad[1], bad[2]))
        assert.strictEqual(error.reason._tag, "ConstraintError")
      }
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
