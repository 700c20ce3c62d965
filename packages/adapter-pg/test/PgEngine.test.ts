// The log engine's slot from configuration: derived from the schema unless OUTBOX_LOG_SLOT says
// otherwise, and refused with a message when it is not a replication slot name.

import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as PgEngine from "../src/PgEngine.ts"

const readSlot = (env: Record<string, string>, schema?: string, prefix?: string) =>
  Effect.gen(function* () {
    return yield* PgEngine.slotConfig(schema, prefix)
  }).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))), Effect.exit)

describe("PgEngine", () => {
  it("the default slot is the schema's and prefix's, in a slot name's alphabet", () => {
    assert.strictEqual(PgEngine.defaultSlot(), "outbox_outbox_log")
    assert.strictEqual(PgEngine.defaultSlot("billing"), "billing_outbox_log")
    assert.strictEqual(PgEngine.defaultSlot("Billing-EU", "evt_"), "billing_eu_evt_log")
    assert.notStrictEqual(PgEngine.defaultSlot("billing"), PgEngine.defaultSlot("shipping"))
    assert.strictEqual(PgEngine.defaultSlot("s".repeat(80)).length, 63)
  })

  it.effect("OUTBOX_LOG_SLOT wins over the default; a name that is not a slot's is refused", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* readSlot({}, "billing"), Exit.succeed("billing_outbox_log"))
      assert.deepStrictEqual(yield* readSlot({ OUTBOX_LOG_SLOT: "orders_log" }, "billing"), Exit.succeed("orders_log"))
      const bad = yield* readSlot({ OUTBOX_LOG_SLOT: "Orders-Log" })
      assert.isTrue(Exit.isFailure(bad))
      assert.include(
        Exit.isFailure(bad) ? Cause.pretty(bad.cause) : "",
        'OUTBOX_LOG_SLOT: "Orders-Log" is not a replication slot name (1-63 of a-z, 0-9, _)'
      )
    })
  )
})
