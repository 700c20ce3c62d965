// `effect-outbox log quarantine list|retry|skip` on a real PostgreSQL: dry runs move nothing,
// --execute moves through the quarantine's transition function and records the operator.
import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogProgress from "@effect-outbox/adapter-pg/PgLogProgress"
import * as PgLogQuarantine from "@effect-outbox/adapter-pg/PgLogQuarantine"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgMigrations from "@effect-outbox/adapter-pg/PgMigrations"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"

const cliOn = (url: string, schema: string, ...args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(Cli.run(["--database-url", url, "--schema", schema, ...args]))
    const out = (yield* TestConsole.logLines).map(String).join("\n")
    const err = (yield* TestConsole.errorLines).map(String).join("\n")
    return { ok: exit._tag === "Success", out, err }
  }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))

const cli = (schema: string, ...args: ReadonlyArray<string>) => cliOn(databaseUrl, schema, ...args)

const dropSchemaAfter = (schema: string) =>
  Effect.addFinalizer(() =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )

describe("effect-outbox log quarantine", () => {
  it.effect("lists, retries and skips, each a dry run until --execute", () =>
    Effect.gen(function* () {
      const schema = `cli_log_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      yield* Effect.addFinalizer(() =>
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
        ).pipe(Effect.ignore)
      )
      const slot = "orders_log"
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      const { store } = yield* PgLogQuarantine.make({ schema, slot })
      const message = (key: string) => ({
        id: randomUUID() as EventId,
        topic: "orders",
        key,
        partition: null,
        headers: {},
        payload: new Uint8Array([1]),
        createdAt: Date.now()
      })
      const [a, b, c] = [message("k"), message("k"), message("j")]
      yield* store.put([
        { message: a, position: "0/10", status: "QUARANTINED", reason: "the topic does not exist" },
        { message: b, position: "0/20", status: "HELD", reason: "behind an earlier event of its key" },
        { message: c, position: "0/20", status: "QUARANTINED", reason: "the topic does not exist" }
      ])

      const listed = yield* cli(schema, "log", "quarantine", "list", "--slot", slot, "--status", "quarantined")
      assert.isTrue(listed.ok, listed.err)
      assert.include(listed.out, a.id)
      assert.include(listed.out, c.id)
      assert.notInclude(listed.out, b.id)

      const dry = yield* cli(schema, "log", "quarantine", "retry", "--slot", slot, "--event-id", a.id)
      assert.isTrue(dry.ok, dry.err)
      assert.include(dry.out, "would move (dry run; add --execute) 2 event(s) to RETRYING")
      assert.deepStrictEqual((yield* store.released).length, 0)

      const done = yield* cli(
        schema,
        "log",
        "quarantine",
        "retry",
        "--slot",
        slot,
        "--event-id",
        a.id,
        "--operator",
        "ana",
        "--execute"
      )
      assert.isTrue(done.ok, done.err)
      assert.deepStrictEqual(
        (yield* store.released).map((g) => g.map((m) => m.id)),
        [[a.id, b.id]]
      )
      const skipped = yield* cli(
        schema,
        "log",
        "quarantine",
        "skip",
        "--slot",
        slot,
        "--event-id",
        c.id,
        "--operator",
        "ana",
        "--execute"
      )
      assert.isTrue(skipped.ok, skipped.err)
      const events = yield* PgLogQuarantine.list({ schema, slot })
      assert.deepStrictEqual(
        events.map((e) => [e.eventId, e.status, e.resolvedBy]),
        [
          [a.id, "RETRYING", "ana"],
          [b.id, "RETRYING", "ana"],
          [c.id, "SKIPPED", "ana"]
        ]
      )
      const again = yield* cli(schema, "log", "quarantine", "skip", "--slot", slot, "--event-id", c.id, "--execute")
      assert.isFalse(again.ok)
      const unknown = yield* cli(schema, "log", "quarantine", "list", "--slot", slot, "--status", "LOST")
      assert.isFalse(unknown.ok)
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 2 })))
  )

  it.live("log slot shows the slot's WAL status, lag, the relay's progress and the quarantine", () =>
    Effect.gen(function* () {
      const schema = `cli_slot_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      const slot = `cli_slot_${randomUUID().replaceAll("-", "").slice(0, 12)}`
      yield* dropSchemaAfter(schema)
      // As the setup step does: the migrations (the event table the publication names), then the slot.
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      yield* PgLogSource.ensureSlot({ slot, schema })
      yield* Effect.addFinalizer(() => PgLogSource.dropSlot({ slot, schema }).pipe(Effect.ignore))
      const progress = yield* PgLogProgress.make({ schema, slot })
      yield* progress.save("0/10")
      const { store } = yield* PgLogQuarantine.make({ schema, slot })
      const message = {
        id: randomUUID() as EventId,
        topic: "orders",
        key: "k",
        partition: null,
        headers: {},
        payload: new Uint8Array([1]),
        createdAt: Date.now()
      }
      yield* store.put([{ message, position: "0/10", status: "QUARANTINED", reason: "the topic does not exist" }])
      const shown = yield* cliOn(logicalUrl, schema, "log", "slot", "--slot", slot)
      assert.isTrue(shown.ok, shown.err)
      assert.include(shown.out, `slot ${slot}: wal_status reserved`)
      assert.include(shown.out, "relay progress: 0/10")
      assert.include(shown.out, "quarantine: 1 quarantined, 0 held")
      const missing = yield* cliOn(logicalUrl, schema, "log", "slot", "--slot", `${slot}_none`)
      assert.isFalse(missing.ok)
      assert.include(missing.err, "is missing")
      // --create is the setup step: the slot exists after it, and the relay's progress marks the gap.
      const created = yield* cliOn(logicalUrl, schema, "log", "slot", "--slot", `${slot}_none`, "--create")
      yield* Effect.addFinalizer(() => PgLogSource.dropSlot({ slot: `${slot}_none`, schema }).pipe(Effect.ignore))
      assert.isTrue(created.ok, created.err)
      assert.include(created.out, `slot ${slot}_none: wal_status reserved`)
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = $1`,
        [`${slot}_none`]
      )
      assert.strictEqual(rows[0]!.n, 1)
    }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 2 })))
  )
})
