// A published migration is frozen: a fresh database must end up exactly where an upgraded one
// is. Migration 2's claim function is a literal in its own file; its text for the default tables
// is pinned here, so an edit to it (or to what it is built from) fails before it ships.
import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import { claimFunctionV2 } from "../src/internal/claimV2.ts"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

/** Every statement the migrations run, in order, captured by a client that only records. */
const statementsOf = (t: PgTables.Tables) =>
  Effect.gen(function* () {
    const captured: Array<string> = []
    const recorder = { unsafe: (text: string) => ({ unprepared: Effect.sync(() => void captured.push(text)) }) }
    for (const [name, migration] of Object.entries(PgMigrations.migrations(t))) {
      captured.push(`-- ${name}`)
      yield* Effect.provideService(migration, SqlClient.SqlClient, recorder as unknown as SqlClient.SqlClient).pipe(
        Effect.orDie
      )
    }
    return captured.join("\n;;\n")
  })

describe("PgMigrations", () => {
  it.effect("migration 2's claim function is the text it was published with", () =>
    Effect.gen(function* () {
      const t = yield* PgTables.make()
      assert.strictEqual(sha256(claimFunctionV2(t)), "49c1c611cac59441465e369eb08235f2dc0f92ee200864d6a3f34fdfc9de0782")
      // only the names are filled in
      const other = claimFunctionV2(yield* PgTables.make({ schema: "s", tablePrefix: "p_" }))
      assert.include(other, `CREATE OR REPLACE FUNCTION "s"."p_claim"(`)
      assert.notInclude(other, `"outbox"`)
    })
  )

  it.effect("every migration runs the statements it was published with", () =>
    Effect.gen(function* () {
      const text = yield* statementsOf(yield* PgTables.make({ schema: "s", tablePrefix: "p_" }))
      assert.strictEqual(sha256(text), "1b4fdcd991bd3c3c4b29e8fc38d3a4fc7b0cf175db5e87047c5c178611f47989")
    })
  )

  it.effect("migrations are numbered in order, none twice", () =>
    Effect.gen(function* () {
      const names = Object.keys(PgMigrations.migrations(yield* PgTables.make()))
      assert.deepStrictEqual(
        names.map((name) => Number(name.split("_")[0])),
        // 7 is the log engine's event table, on its own branch until merged.
        [1, 2, 3, 4, 5, 6, 8, 9]
      )
    })
  )
})
