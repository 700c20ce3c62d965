// The runtime's health checks on the in-memory database and broker, on the TestClock: a claim
// relay that claims every poll interval stays ready however long it idles; one whose claim never
// returns (a stuck loop) turns unready after 2 minutes, naming the relay; liveness is about the
// runtime itself, and turns unhealthy once it shuts down. Every check is also a gauge, sampled with
// the runtime's metrics; the log engine's slot lag over its limit makes the process unready.
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
import * as Metric from "effect/Metric"
import * as References from "effect/References"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import { BrokerAdmin } from "../src/BrokerAdmin.ts"
import * as Health from "../src/Health.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import * as WakeUp from "../src/WakeUp.ts"

const ports = Layer.mergeAll(InMemoryDatabase.layer, WakeUp.layerMemory, InMemoryBroker.layer({ topics: {} }))

// A store whose claim takes an hour: the relay's loop waits on it.
const stuckClaims = Layer.effect(OutboxStore)(
  Effect.map(Effect.service(OutboxStore), (store) => ({ ...store, claim: () => Effect.as(Effect.sleep("1 hour"), []) }))
)

/**
 * The in-memory broker's admin with the topic listing the Kafka adapters have (the health check's
 * broker probe), recording every call made through the port.
 */
const countingAdmin = Effect.sync(() => {
  const calls: Array<string> = []
  const counted = (admin: BrokerAdmin["Service"]): BrokerAdmin["Service"] => {
    const wrapped: Record<string, unknown> = {}
    for (const [name, member] of Object.entries(admin)) {
      wrapped[name] =
        typeof member === "function"
          ? (...args: Array<unknown>) => {
              calls.push(name)
              return (member as (...args: Array<unknown>) => unknown)(...args)
            }
          : member
    }
    return {
      ...(wrapped as BrokerAdmin["Service"]),
      listTopics: Effect.suspend(() => {
        calls.push("listTopics")
        return Effect.succeed([])
      })
    }
  }
  return {
    calls: () => [...calls],
    layer: Layer.effect(BrokerAdmin)(Effect.map(Effect.service(BrokerAdmin), counted))
  }
})

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

  it.effect(
    "each readiness check is a gauge (1 ok, 0 failing), set every metrics interval once health is asked for",
    () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const layer = OutboxRuntime.layer({
          relay: { instances: 1, owner: "gauged", pollInterval: Duration.millis(100) },
          metricsInterval: Duration.seconds(5)
        }).pipe(Layer.provideMerge(ports), Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} }))))
        const { health } = Context.get(yield* Layer.buildWithScope(layer, scope), OutboxRuntime.OutboxRuntime)
        yield* health.live
        const gauge = (check: string) => Metric.value(Metric.withAttributes(Health.checkGauge, { check }))
        yield* TestClock.adjust("6 seconds")
        assert.strictEqual((yield* gauge("database")).value, 1)
        assert.strictEqual((yield* gauge("relay gauged")).value, 1)
        assert.strictEqual((yield* gauge("runtime")).value, 1)
        yield* Health.record({ ok: false, checks: [{ name: "database", ok: false, detail: "down" }] })
        assert.strictEqual((yield* gauge("database")).value, 0)
        yield* TestClock.adjust("5 seconds")
        assert.strictEqual((yield* gauge("database")).value, 1, "the next sample sets it back")
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
  )

  it.effect(
    "without a health port nobody asks for health: the runtime calls no broker admin in the background until its Health is used",
    () =>
      Effect.gen(function* () {
        const counter = yield* countingAdmin
        const scope = yield* Scope.make()
        const layer = OutboxRuntime.layer({ relay: false, metricsInterval: Duration.seconds(5) }).pipe(
          Layer.provideMerge(Layer.provideMerge(counter.layer, ports)),
          Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))
        )
        const { health, healthPort } = Context.get(
          yield* Layer.buildWithScope(layer, scope),
          OutboxRuntime.OutboxRuntime
        )
        assert.isUndefined(healthPort)
        // The start-up check asks the broker once; nothing after it.
        const atStart = counter.calls()
        assert.deepStrictEqual(atStart, ["listTopics"])
        for (let i = 0; i < 12; i++) yield* TestClock.adjust("5 seconds")
        assert.deepStrictEqual(counter.calls(), atStart, "a minute of metrics intervals: no admin call")

        // Asked for once, the checks run now and then every metrics interval, into the gauges.
        const ready = yield* health.ready
        assert.deepStrictEqual(
          ready.checks.find((c) => c.name === "broker"),
          { name: "broker", ok: true, detail: "answers (0 topics)" }
        )
        const asked = counter.calls().length
        assert.strictEqual(asked, atStart.length + 1)
        for (let i = 0; i < 3; i++) yield* TestClock.adjust("5 seconds")
        assert.isAtLeast(counter.calls().length, asked + 3, "sampled every interval from then on")
        assert.strictEqual(
          (yield* Metric.value(Metric.withAttributes(Health.checkGauge, { check: "broker" }))).value,
          1
        )
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
  )

  it.effect("with a health port the checks are sampled from the start", () =>
    Effect.gen(function* () {
      const counter = yield* countingAdmin
      const scope = yield* Scope.make()
      const layer = OutboxRuntime.layer({
        relay: false,
        metricsInterval: Duration.seconds(5),
        health: { port: 0, host: "127.0.0.1", timeout: Duration.seconds(3) }
      }).pipe(
        Layer.provideMerge(Layer.provideMerge(counter.layer, ports)),
        Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} })))
      )
      const { healthPort } = Context.get(yield* Layer.buildWithScope(layer, scope), OutboxRuntime.OutboxRuntime)
      assert.isDefined(healthPort)
      for (let i = 0; i < 3; i++) yield* TestClock.adjust("5 seconds")
      // The start-up check, then one sample now and one per interval: nobody called the service.
      assert.isAtLeast(counter.calls().length, 1 + 3)
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provideService(References.MinimumLogLevel, "None"))
  )

  it.effect("the log relay's slot lag over its limit, or a lost slot, makes the process unready", () =>
    Effect.gen(function* () {
      const withLag = (lagBytes: number, walStatus = "reserved") =>
        Health.make(
          {
            relays: [{ owner: "log-relay" }],
            consumers: Effect.succeed([]),
            stopping: Effect.succeed(false),
            slot: {
              gauges: Effect.succeed({ lagBytes, retainedBytes: lagBytes, walStatus }),
              maxLagBytes: 64 * 1_048_576
            }
          },
          { timeout: Duration.seconds(1) }
        )
      const slot = (report: Health.Report) => report.checks.find((c) => c.name === "log slot")
      const fine = yield* (yield* withLag(1_048_576)).ready
      assert.isTrue(fine.ok, JSON.stringify(fine))
      assert.deepStrictEqual(slot(fine), { name: "log slot", ok: true, detail: "lag 1.0 MiB (limit 64.0 MiB)" })
      const behind = yield* (yield* withLag(100 * 1_048_576)).ready
      assert.isFalse(behind.ok)
      assert.deepStrictEqual(slot(behind), {
        name: "log slot",
        ok: false,
        detail: "lag 100.0 MiB over 64.0 MiB (OUTBOX_HEALTH_MAX_SLOT_LAG_BYTES)"
      })
      const lost = yield* (yield* withLag(0, "lost")).ready
      assert.isFalse(lost.ok)
      assert.match(slot(lost)?.detail ?? "", /wal_status lost/)
    }).pipe(Effect.provide(InMemoryDatabase.layer))
  )
})
