import { assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Relay from "@effect-outbox/core/Relay"
import * as Effect from "effect/Effect"
import { draft, logTexts, makeWorld, rows } from "./support/outboxEnv.ts"

describe("Relay", () => {
  it.effect("smoke: publishes enqueued events", () =>
    Effect.gen(function*() {
      const world = yield* makeWorld()
      yield* Effect.gen(function*() {
        yield* Outbox.enqueue([draft("a", 1), draft("a", 2), draft("b", 1)])
        const relay = yield* Relay.make({ owner: "r1" })
        const result = yield* relay.runOnce
        assert.strictEqual(result.published, 3)
        const all = yield* rows(world.database)
        assert.deepStrictEqual(all.map((r) => r.status), ["PUBLISHED", "PUBLISHED", "PUBLISHED"])
        console.log(yield* logTexts(world.broker))
      }).pipe(Effect.provide(world.layer))
    }))
})
