// Where the tables live: names, channel and lock namespaces resolved from schema and prefix,
// and anything that would need quoting refused before it reaches SQL.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as PgTables from "../src/PgTables.ts"

describe("PgTables", () => {
  it.effect("defaults to schema outbox and prefix outbox_", () =>
    Effect.gen(function* () {
      const t = yield* PgTables.make()
      assert.strictEqual(t.message, `"outbox"."outbox_message"`)
      assert.strictEqual(t.processed, `"outbox"."outbox_processed"`)
      assert.strictEqual(t.partitionAssignment, `"outbox"."outbox_partition_assignment"`)
      assert.strictEqual(t.transition, `"outbox"."outbox_transition"`)
      assert.strictEqual(t.claimFunction, `"outbox"."outbox_claim"`)
      assert.strictEqual(t.migrations, "outbox.outbox_migrations")
      assert.strictEqual(t.channel, "outbox_outbox_wakeup")
    })
  )

  it.effect("two outboxes get distinct channels and lock namespaces; each purpose its own namespace", () =>
    Effect.gen(function* () {
      const a = yield* PgTables.make({ schema: "s", tablePrefix: "orders_" })
      const b = yield* PgTables.make({ schema: "s", tablePrefix: "billing_" })
      assert.notStrictEqual(a.channel, b.channel)
      const all = [...Object.values(a.locks), ...Object.values(b.locks)]
      assert.strictEqual(new Set(all).size, all.length)
      for (const n of all) assert.isTrue(Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31)
      assert.strictEqual((yield* PgTables.make({ channel: "custom" })).channel, "custom")
    })
  )

  it.effect("names that would need quoting, and channels over 63 bytes, are refused", () =>
    Effect.gen(function* () {
      for (const options of [
        { schema: "Outbox" },
        { schema: "a;drop" },
        { schema: "" },
        { tablePrefix: "x-" },
        {
          tablePrefix: "P_"
        }
      ]) {
        const error = yield* Effect.flip(PgTables.make(options))
        assert.strictEqual(error._tag, "OutboxValidationError")
      }
      const long = yield* Effect.flip(PgTables.make({ schema: "s".repeat(50), tablePrefix: "p".repeat(20) }))
      assert.strictEqual(long.field, "channel")
      assert.strictEqual((yield* PgTables.make({ tablePrefix: "" })).message, `"outbox"."message"`)
    })
  )
})
