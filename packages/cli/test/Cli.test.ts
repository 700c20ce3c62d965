// The CLI without services: its help lists every command, durations parse, and a command that
// lacks its connection says what to set instead of failing obscurely.
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { BEHIND_ITS_HEAD } from "@effect-outbox/core/OutboxMessage"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"
import * as Render from "../src/Render.ts"

const run = (...args: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const exit = yield* Effect.exit(Cli.run(args))
    return {
      ok: exit._tag === "Success",
      out: (yield* TestConsole.logLines).map(String).join("\n"),
      err: (yield* TestConsole.errorLines).map(String).join("\n")
    }
  }).pipe(Effect.provide(TestConsole.layer), Effect.provide(NodeServices.layer))

describe("effect-outbox CLI", () => {
  it.effect("--help lists every command and the shared connection flags", () =>
    Effect.gen(function* () {
      const help = yield* run("--help")
      assert.isTrue(help.ok)
      for (const command of ["status", "inspect", "requeue", "release", "recover-stale", "dlt", "purge"]) {
        assert.include(help.out, command)
      }
      for (const flag of ["--database-url", "--schema", "--table-prefix", "--brokers", "--json"]) {
        assert.include(help.out, flag)
      }
      const requeue = yield* run("requeue", "--help")
      assert.include(requeue.out, "--execute")
      assert.include(requeue.out, "--reason")
    })
  )

  it.effect("a command without a database says which flag or variable to set", () =>
    Effect.gen(function* () {
      const status = yield* run("status")
      assert.isFalse(status.ok)
      assert.include(status.err, "pass --database-url or set DATABASE_URL")
      const dlt = yield* run("dlt", "list", "orders.DLT")
      assert.isFalse(dlt.ok)
      assert.include(dlt.err, "pass --brokers or set KAFKA_BROKERS")
    }).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} }))))
  )

  it("durations: short forms, Effect durations, and garbage", () => {
    assert.deepStrictEqual(Cli.parseDuration("7d"), Option.some(7 * 86_400_000))
    assert.deepStrictEqual(Cli.parseDuration("12h"), Option.some(12 * 3_600_000))
    assert.deepStrictEqual(Cli.parseDuration("30m"), Option.some(30 * 60_000))
    assert.deepStrictEqual(Cli.parseDuration("500ms"), Option.some(500))
    assert.deepStrictEqual(Cli.parseDuration("30 days"), Option.some(30 * 86_400_000))
    assert.isTrue(Option.isNone(Cli.parseDuration("soon")))
    assert.isTrue(Option.isNone(Cli.parseDuration("-5d")))
  })

  it("ages read at a glance", () => {
    assert.strictEqual(Render.age(null), "-")
    assert.strictEqual(Render.age(1500), "1.5 s")
    assert.strictEqual(Render.age(90_000), "1.5 min")
    assert.strictEqual(Render.age(5_400_000), "1.5 h")
    assert.strictEqual(Render.age(2 * 86_400_000), "2.0 d")
  })

  it("a row's availableAt reads as a time, or, set aside behind its key's head, as when it comes back", () => {
    const iso = (millis: number) => new Date(millis).toISOString()
    assert.strictEqual(Render.availableAtText(0, iso), "1970-01-01T00:00:00.000Z")
    assert.strictEqual(Render.availableAtText(BEHIND_ITS_HEAD, iso), "when its key's head has gone")
  })
})
