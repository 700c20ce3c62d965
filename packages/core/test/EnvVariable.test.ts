// One declaration per variable: the Config read from it, the default the modules use, the row the
// reference page shows.

import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as EnvVariable from "../src/EnvVariable.ts"
import { closest } from "../src/internal/runtime/unknownVariables.ts"
import * as Relay from "../src/Relay.ts"

const read = <A>(variable: EnvVariable.EnvVariable<A>, env: Record<string, string>) =>
  Effect.gen(function* () {
    return yield* variable.config
  }).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))

describe("EnvVariable", () => {
  it.effect("a variable reads its name, falls back to its default, and shows both on the page", () =>
    Effect.gen(function* () {
      const lease = EnvVariable.duration("TEST_LEASE", "30 seconds", "how long")
      assert.isTrue(Duration.equals(yield* read(lease, {}), Duration.seconds(30)))
      assert.isTrue(Duration.equals(yield* read(lease, { TEST_LEASE: "2 minutes" }), Duration.minutes(2)))
      assert.isTrue(Duration.equals(lease.value, Duration.seconds(30)))
      const owner = EnvVariable.optionalString("TEST_OWNER", "a random id", "who")
      assert.isTrue(Option.isNone(yield* read(owner, {})))
      assert.strictEqual(owner.default, "unset: a random id")
      const policy = EnvVariable.literal("TEST_POLICY", ["block", "skip"], "block", "what")
      assert.strictEqual(yield* read(policy, { TEST_POLICY: "skip" }), "skip")
      assert.strictEqual(policy.type, "`block` \\| `skip`")
      const refused = yield* Effect.flip(read(policy, { TEST_POLICY: "maybe" }))
      assert.include(String(refused), "TEST_POLICY")
    })
  )

  it("durations are written as a person writes them", () => {
    assert.strictEqual(EnvVariable.formatDuration("30 seconds"), "30 seconds")
    assert.strictEqual(EnvVariable.formatDuration(Duration.millis(500)), "500 millis")
    assert.strictEqual(EnvVariable.formatDuration(Duration.minutes(1)), "1 minute")
    assert.strictEqual(EnvVariable.formatDuration(Duration.days(7)), "7 days")
    assert.strictEqual(EnvVariable.formatDuration(Duration.millis(1500)), "1500 millis")
  })

  it("the modules' defaults are the tables' defaults; the page lists every declared variable once", () => {
    assert.strictEqual(Relay.defaults.batchSize, 100)
    assert.isTrue(Duration.equals(Relay.defaults.lease, Duration.seconds(30)))
    const page = EnvVariable.markdown(EnvVariable.tables())
    assert.include(page, "| `OUTBOX_RELAY_BATCH_SIZE` | integer | `100` | rows claimed per batch |")
    assert.include(page, "| `OUTBOX_RELAY_LEASE` | duration | `30 seconds` |")
    const names = EnvVariable.tables().flatMap((t) => t.variables.map((v) => v.name))
    assert.strictEqual(new Set(names).size, names.length)
  })

  it("an unknown name is matched to the known name it resembles, a far one to none", () => {
    const known = ["OUTBOX_RELAY_BATCH_SIZE", "OUTBOX_SCHEMA", "OUTBOX_RELAY_LEASE"]
    assert.strictEqual(closest("OUTBOX_RELAY_BATCHSIZE", known), "OUTBOX_RELAY_BATCH_SIZE")
    assert.strictEqual(closest("OUTBOX_SCHEME", known), "OUTBOX_SCHEMA")
    assert.isUndefined(closest("OUTBOX_COLOUR_OF_THE_SKY", known))
  })
})
