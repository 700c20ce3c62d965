// Creating the log engine's slot is an explicit setup step, after the migrations: the publication
// names the event table. Asked first, it says what to run instead of a bare SQL error.
import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as LogSetup from "../src/internal/logSetup.ts"
import * as PgLogOutbox from "../src/PgLogOutbox.ts"
import * as PgLogSource from "../src/PgLogSource.ts"

const url = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })

describe("PgLogSource.ensureSlot", () => {
  it.live("before the migrations: a typed error naming the missing event table and the setup step; no slot left", () =>
    Effect.gen(function* () {
      const slot = `setup_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      const error = yield* Effect.flip(PgLogSource.ensureSlot({ slot, schema: slot }))
      assert.strictEqual(error._tag, "LogSourceError")
      assert.isFalse(error.retriable)
      assert.include(error.reason, `"${slot}"."outbox_log_event" does not exist`)
      assert.include(error.reason, "PgLogOutbox.setup")
      const sql = yield* SqlClient.SqlClient
      const slots = yield* sql<{
        n: number
      }>`SELECT count(*)::int AS n FROM pg_replication_slots WHERE slot_name = ${slot}`
      assert.strictEqual(slots[0]!.n, 0)
    }).pipe(Effect.scoped, Effect.provide(client))
  )

  it("creates a fail-over slot where the server has them (PostgreSQL 17+), a plain one before", () => {
    assert.include(LogSetup.createSlotSql("s", 170_000), "'pgoutput', false, false, true)")
    assert.include(LogSetup.createSlotSql("s", 160_004), "'pgoutput'))")
  })

  it.live("on this server: the slot is created, with the fail-over flag exactly when the server has it", () =>
    Effect.gen(function* () {
      const slot = `setup_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      const sql = yield* SqlClient.SqlClient
      yield* PgLogOutbox.setup({ slot, schema: slot })
      try {
        const [{ version }] = yield* sql<{
          version: number
        }>`SELECT current_setting('server_version_num')::int4 AS version`
        const rows = yield* sql.unsafe<{ failover: boolean | null }>(
          version >= LogSetup.FAILOVER_SLOTS_VERSION
            ? `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`
            : `SELECT NULL::bool AS failover FROM pg_replication_slots WHERE slot_name = $1`,
          [slot]
        )
        assert.strictEqual(rows.length, 1, "the slot exists")
        assert.strictEqual(rows[0]!.failover, version >= LogSetup.FAILOVER_SLOTS_VERSION ? true : null)
      } finally {
        yield* PgLogSource.dropSlot({ slot })
        yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${slot}" CASCADE`)
      }
    }).pipe(Effect.scoped, Effect.provide(client))
  )
})
