// The demo's engine choice: `--engine` on the command line (or OUTBOX_ENGINE), and the log
// engine refused on the embedded default with a message that says what server it needs.
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Program from "../src/Program.ts"
import * as Services from "../src/Services.ts"

const withEnv = (env: Record<string, string>) => Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))

describe("demo engine", () => {
  it.effect("--engine wins over OUTBOX_ENGINE, which is claim by default; a wrong value names the engines", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* Services.engine([]).pipe(withEnv({})), "claim")
      assert.strictEqual(yield* Services.engine([]).pipe(withEnv({ OUTBOX_ENGINE: "log" })), "log")
      assert.strictEqual(yield* Services.engine(["--engine", "log"]).pipe(withEnv({})), "log")
      assert.strictEqual(yield* Services.engine(["--engine=claim"]).pipe(withEnv({ OUTBOX_ENGINE: "log" })), "claim")
      const bad = yield* Effect.exit(Services.engine(["--engine", "wal"]).pipe(withEnv({})))
      assert.include(Exit.isFailure(bad) ? Cause.pretty(bad.cause) : "", "use one of claim, log")
    })
  )

  it.effect("the log engine takes LOGICAL_DATABASE_URL before DATABASE_URL and says which", () =>
    Effect.gen(function* () {
      const base: Services.Selection = {
        databaseUrl: Redacted.make("postgres://a@h1:5432/db"),
        kafkaBrokers: undefined
      }
      const logical = yield* Services.logicalSelection(base).pipe(
        withEnv({ LOGICAL_DATABASE_URL: "postgres://b@h2:25433/postgres" })
      )
      assert.strictEqual(Redacted.value(logical.databaseUrl!), "postgres://b@h2:25433/postgres")
      assert.include(Services.describe(logical)[0]!, "h2:25433/postgres (LOGICAL_DATABASE_URL)")
      assert.strictEqual(yield* Services.logicalSelection(base).pipe(withEnv({})), base)
    })
  )

  it.effect("the log engine on the embedded default fails with what to start instead", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Program.runDemo({
          selection: { databaseUrl: undefined, kafkaBrokers: undefined },
          engine: "log",
          write: () => {}
        })
      )
      assert.isTrue(Exit.isFailure(exit))
      const text = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
      assert.include(text, "wal_level = logical")
      assert.include(text, "scripts/services pg-private up")
      assert.include(text, "LOGICAL_DATABASE_URL")
    })
  )
})
