// The log relay's durable progress on PostgreSQL: saved per slot, never moved back, and ignored
// when the record is not this cluster's.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import { compareLsn, lsn } from "../src/internal/logProgress.ts"
import * as PgLogProgress from "../src/PgLogProgress.ts"
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

describe("PgLogProgress", () => {
  it("orders LSNs by value, not by text", () => {
    assert.isBelow(compareLsn("0/FFFFFFFF", "1/0"), 0)
    assert.isAbove(compareLsn("A/10", "9/FFFFFFFF"), 0)
    assert.strictEqual(compareLsn("2/1B", "2/1b"), 0)
    assert.strictEqual(lsn("1/0"), 4294967296n)
    assert.throws(() => lsn("12345"), /not a PostgreSQL LSN/)
  })

  it.effect("saves per slot, never moves back, and ignores a record of another cluster", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      // The tables come with the outbox migrations (PgLogOutbox.setup runs them in a service).
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      const sql = yield* SqlClient.SqlClient
      const a = yield* PgLogProgress.make({ schema, slot: "a" })
      const b = yield* PgLogProgress.make({ schema, slot: "b" })
      assert.strictEqual(yield* a.published, null)
      yield* a.save("0/100")
      yield* a.save("0/80") // a late save of a relay that lost the lease
      yield* b.save("0/10")
      assert.strictEqual(yield* a.published, "0/100")
      assert.strictEqual(yield* b.published, "0/10")
      // A position past this server's WAL, or another cluster's, is not trusted.
      yield* sql.unsafe(`UPDATE "${schema}".outbox_log_progress SET position = 'FFFFFF/0' WHERE slot = 'b'`)
      assert.strictEqual(yield* b.published, null)
      yield* sql.unsafe(`UPDATE "${schema}".outbox_log_progress SET system_identifier = '1' WHERE slot = 'a'`)
      assert.strictEqual(yield* a.published, null)
      // The next save of this cluster replaces the foreign record, even when lower.
      yield* a.save("0/50")
      assert.strictEqual(yield* a.published, "0/50")
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
