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
const statementsOf = (t: PgTables.Tables, numbers: ReadonlyArray<number>) =>
  Effect.gen(function* () {
    const captured: Array<string> = []
    const recorder = { unsafe: (text: string) => ({ unprepared: Effect.sync(() => void captured.push(text)) }) }
    for (const [name, migration] of Object.entries(PgMigrations.migrations(t))) {
      if (!numbers.includes(Number(name.split("_")[0]))) continue
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
      const t = yield* PgTables.make({ schema: "s", tablePrefix: "p_" })
      const pinned: ReadonlyArray<readonly [ReadonlyArray<number>, string]> = [
        [[1, 2, 3, 4, 5, 6], "ee7620b2797b77e0a118fb848b62919cf7b3e545d4269754f0325dd486c7a6ba"],
        [[7], "7cbecfec0952d251b53eacf2904adc5eb6d7e0778377cdc99db2b922f0fff2ed"],
        [[8], "51fc5f09a2c5bdc5d45b092e979b5453a8185e494b10b0d2cb91038ae3e4df74"],
        [[9, 10], "0a7a01660be027a85113725b50340c2a5d6712a24624a714bd2c183b49cdc59d"],
        [[11], "39325ce0be48f536448b55c85697212a2956a4ed3cd6df28dc32f9286785ee9a"],
        [[12], "150058ecb04d373335e2443517983bc7aec8ddeb6e90f40c147790f9251b28ca"],
        [[13], "8091c3d4a49eb889c45b83a36d75c56956826e0c8a41e88ef3fa4fa90c1c4d42"],
        [[14], "f99680e619ab4b0508f7c1ead2b8fe3ef71d382e3dfe0be70e2e5659ee9d9d51"],
        [[15], "6f42783ec5fe29d682e066a4d75cc7ac208dd0a236706a1b31d6d37ce0b08bff"],
        [[16], "c01fa98a3eafe8e4ef1fb004a533678668c8c7da9816feb6f2fec334f36f4a4a"],
        [[17], "5f8c478089f3b315a2fdab398e695c1ac19a9f84e5a98031cc51b79ed1e7ccca"]
      ]
      for (const [numbers, hash] of pinned)
        assert.strictEqual(sha256(yield* statementsOf(t, numbers)), hash, `migrations ${numbers}`)
    })
  )

  it.effect("migrations are numbered 1 to 17 without a gap", () =>
    Effect.gen(function* () {
      const names = Object.keys(PgMigrations.migrations(yield* PgTables.make()))
      assert.deepStrictEqual(
        names.map((name) => Number(name.split("_")[0])),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
      )
    })
  )
})
