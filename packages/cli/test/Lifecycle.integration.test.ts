// `effect-outbox lifecycle list|release` against the real PostgreSQL: the registrations the
// runtimes wrote, and an audited hand-over (dry run unless --execute).

import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

describe("effect-outbox lifecycle", () => {
  it.live("list shows each topic's group; release is a dry run, then audited, then another group may register", () =>
    Effect.gen(function* () {
      const schema = `cli_lc_${randomUUID().replaceAll("-", "").slice(0, 16)}`
      const context = yield* Layer.build(
        PgOutbox.layer({ schema, wakeUp: { listen: false } }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 2 }))
        )
      )
      yield* Effect.addFinalizer(() =>
        Effect.flatMap(
          Effect.service(SqlClient.SqlClient),
          (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
        ).pipe(Effect.provideContext(context), Effect.ignore)
      )
      const registry = yield* Effect.service(LifecycleRegistry).pipe(Effect.provideContext(context))
      yield* registry.register("orders", "billing")
      yield* registry.register("payments", "ledger")

      const audit: Array<string> = []
      const logger = Logger.make(
        ({ message }) => void audit.push(Array.isArray(message) ? message.join(" ") : String(message))
      )
      const cli = (...args: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const exit = yield* Effect.exit(Cli.run(["--database-url", databaseUrl, "--schema", schema, ...args]))
          const out = (yield* TestConsole.logLines).map(String).join("\n")
          const err = (yield* TestConsole.errorLines).map(String).join("\n")
          return { ok: exit._tag === "Success", out, err }
        }).pipe(
          Effect.provide(TestConsole.layer),
          Effect.provide(NodeServices.layer),
          Effect.provideService(Logger.CurrentLoggers, new Set([logger]))
        )

      const listed = yield* cli("lifecycle", "list", "--json")
      assert.isTrue(listed.ok, listed.err)
      assert.deepStrictEqual(
        JSON.parse(listed.out).map((r: { topic: string; group: string }) => [r.topic, r.group]),
        [
          ["orders", "billing"],
          ["payments", "ledger"]
        ]
      )
      const human = yield* cli("lifecycle", "list", "--topic", "orders")
      assert.include(human.out, "orders  billing")
      assert.notInclude(human.out, "payments")

      const target = ["--topic", "orders", "--group", "billing", "--reason", "billing retired", "--operator", "ada"]
      const dry = yield* cli("lifecycle", "release", ...target)
      assert.isTrue(dry.ok, dry.err)
      assert.include(dry.out, "dry run")
      assert.strictEqual((yield* registry.list({ topic: "orders" }))[0]?.group, "billing")

      const wrong = yield* cli("lifecycle", "release", "--topic", "orders", "--group", "shipping", "--reason", "x")
      assert.isFalse(wrong.ok)
      assert.include(wrong.err, "registered to group billing, not shipping")
      const unexplained = yield* cli("lifecycle", "release", "--topic", "orders", "--group", "billing", "--execute")
      assert.isFalse(unexplained.ok)
      assert.include(unexplained.err, "--reason is required")

      const done = yield* cli("lifecycle", "release", ...target, "--execute")
      assert.isTrue(done.ok, done.err)
      assert.include(done.out, "released group billing")
      const line = audit.find((l) => l.startsWith("AUDIT outbox lifecycle release by ada"))
      assert.isDefined(line, audit.join("\n"))
      assert.include(line!, "billing retired")
      assert.strictEqual((yield* registry.register("orders", "shipping")).group, "shipping")
    }).pipe(Effect.scoped)
  )
})
