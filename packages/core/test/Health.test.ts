// The runtime's health checks on the in-memory database and broker, on the TestClock: a claim
// relay that claims every poll interval stays ready however long it idles; one whose claim never
// returns (a stuck loop) turns unready after 2 minutes, naming the relay; liveness is about the
// runtime itself, and turns unhealthy once it shuts down.
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import type * as Health from "../src/Health.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import * as WakeUp from "../src/WakeUp.ts"

const ports = Layer.mergeAll(InMemoryDatabase.layer, WakeUp.layerMemory, InMemoryBroker.layer({ topics: {} }))

// A store whose claim takes an hour: the relay's loop waits on it.
const stuckClaims = Layer.effect(OutboxStore)(
  Effect.map(Effect.service(OutboxStore), (store) => ({ ...store, claim: () => Effect.as(Effect.sleep("1 hour"), []) }))
)

const relayCheck = (report: Health.Report) => report.checks.find((c) => c.name.startsWith("relay "))

const runtime = (stuck: boolean) =>
  OutboxRuntime.layer({ relay: { instances: 1, owner: "r1", pollInterval: Duration.millis(100) } }).pipe(
    Layer.provideMerge(stuck ? Layer.provideMerge(stuckClaims, ports) : ports),
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))
  )

describe("Health", () => {
  it.effect("an idle claim relay stays ready for 10 minutes; the runtime is live until it shuts down", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { health } = Context.get(yield* Layer.buildWithScope(runtime(false), scope), OutboxRuntime.OutboxRuntime)
      for (let i = 0; i < 60; i++) yield* TestClock.adjust("10 seconds")
      const ready = yield* health.ready
      assert.isTrue(ready.ok, JSON.stringify(ready))
      assert.deepStrictEqual(relayCheck(ready), { name: "relay r1", ok: true, detail: "running" })
      assert.isTrue((yield* health.live).ok)
      yield* Scope.close(scope, Exit.void)
      const live = yield* health.live
      assert.isFalse(live.ok)
      assert.deepStrictEqual(live.checks, [{ name: "runtime", ok: false, detail: "shutting down" }])
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
  )

  it.effect("a claim relay whose loop is stuck turns the runtime unready after 2 minutes, naming it", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { health } = Context.get(yield* Layer.buildWithScope(runtime(true), scope), OutboxRuntime.OutboxRuntime)
      yield* TestClock.adjust("100 seconds")
      assert.isTrue(relayCheck(yield* health.ready)?.ok, "within 2 minutes it may still be a slow claim")
      yield* TestClock.adjust("30 seconds")
      const ready = yield* health.ready
      assert.isFalse(ready.ok)
      assert.deepStrictEqual(relayCheck(ready), {
        name: "relay r1",
        ok: false,
        detail: "no claim for 130 s: its loop is stuck"
      })
      assert.isTrue((yield* health.live).ok, "readiness only: restarting is the orchestrator's call")
      // Shutting down waits for the claim in flight (an hour of the test's clock).
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust("2 hours")
      yield* Fiber.join(closing)
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
  )
})
