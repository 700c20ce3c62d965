// The all-in-one layer: relays, recovery, retention and the declared consumers run for the life
// of one layer, tuned by Config, and shut down gracefully with it.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as InMemoryLifecycleRegistry from "@effect-outbox/testing/InMemoryLifecycleRegistry"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import type * as Health from "../src/Health.ts"
import type { Inbox } from "../src/Inbox.ts"
import { LifecycleRegistry } from "../src/LifecycleRegistry.ts"
import * as Outbox from "../src/Outbox.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import type { Publisher } from "../src/Publisher.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import * as Transition from "../src/Transition.ts"
import * as WakeUp from "../src/WakeUp.ts"

const Greeting = Schema.Struct({ to: Schema.String, n: Schema.Int })
const Greetings = Topic.make({ name: "greetings", schema: Greeting, key: (greeting) => greeting.to })

/** A fresh in-memory database and broker; the ports the runtime needs. */
const ports = () =>
  Layer.mergeAll(
    InMemoryDatabase.layer,
    WakeUp.layerMemory,
    InMemoryBroker.layer({ topics: { greetings: 2, "greetings.DLT": 1 } })
  )

const env = (values: Record<string, string>) => ConfigProvider.layer(ConfigProvider.fromEnv({ env: values }))

const fast = { pollInterval: Duration.millis(20), instances: 1 }

describe("OutboxRuntime", () => {
  it.effect("a second group driving the lifecycle of the same topic is refused when the layer is built (H5)", () =>
    Effect.gen(function* () {
      const declare = (groupId: string, lifecycle?: boolean) =>
        OutboxRuntime.consumer(
          Topic.consumer(Greetings, {
            groupId,
            handler: () => Effect.void,
            ...(lifecycle === undefined ? {} : { lifecycle })
          })
        )
      const build = (consumers: ReadonlyArray<OutboxRuntime.ConsumerDeclaration<never>>) =>
        Layer.build(
          OutboxRuntime.layer({ relay: false, consumers }).pipe(Layer.provideMerge(ports()), Layer.provide(env({})))
        ).pipe(Effect.scoped, Effect.exit)

      const refused = yield* build([declare("billing"), declare("shipping")])
      assert.isTrue(Exit.isFailure(refused))
      const conflict = Exit.isFailure(refused) ? Option.getOrUndefined(Cause.findErrorOption(refused.cause)) : undefined
      assert.instanceOf(conflict, OutboxRuntime.LifecycleGroupConflictError)
      assert.deepStrictEqual(conflict.groups, ["billing", "shipping"])
      assert.include(conflict.message, "lifecycle: false")

      // One driver and any number of lifecycle: false groups is fine.
      assert.isTrue(
        Exit.isSuccess(yield* build([declare("billing"), declare("shipping", false), declare("audit", false)]))
      )
    })
  )

  it.effect("with a shared registry, a driving group of another runtime is refused; the same group is not", () =>
    Effect.gen(function* () {
      const registry = Layer.succeed(LifecycleRegistry)(InMemoryLifecycleRegistry.make())
      const infos: Array<string> = []
      const capture = Logger.make((options) => {
        if (options.logLevel === "Info") infos.push(String((options.message as ReadonlyArray<unknown>)[0]))
      })
      const build = (groupId: string) =>
        Layer.build(
          OutboxRuntime.layer({
            relay: false,
            consumers: [OutboxRuntime.consumer(Topic.consumer(Greetings, { groupId, handler: () => Effect.void }))]
          }).pipe(Layer.provideMerge(ports()), Layer.provide(registry), Layer.provide(env({})))
        ).pipe(Effect.scoped, Effect.provide(Logger.layer([capture])), Effect.exit)

      assert.isTrue(Exit.isSuccess(yield* build("billing")))
      assert.include(infos, "group billing has no committed offsets on greetings: reading from the earliest offset")
      assert.isTrue(Exit.isSuccess(yield* build("billing")))
      const refused = yield* build("shipping")
      const conflict = Exit.isFailure(refused) ? Option.getOrUndefined(Cause.findErrorOption(refused.cause)) : undefined
      assert.instanceOf(conflict, OutboxRuntime.LifecycleGroupConflictError)
      assert.strictEqual(conflict.registered, "billing")
      assert.deepStrictEqual(conflict.groups, ["billing", "shipping"])
      assert.include(conflict.message, "effect-outbox lifecycle release --topic greetings --group billing")
    })
  )

  it.effect("OUTBOX_* variables nothing reads are one warning at start, with the name each resembles", () =>
    Effect.gen(function* () {
      const warnings: Array<string> = []
      const capture = Logger.make((options) => {
        if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
      })
      const build = (values: Record<string, string>) =>
        Layer.build(
          OutboxRuntime.layer({ relay: false }).pipe(Layer.provideMerge(ports()), Layer.provide(env(values)))
        ).pipe(Effect.scoped, Effect.provide(Logger.layer([capture])))

      yield* build({ OUTBOX_RELAY_BATCH_SIZE: "5", OUTBOX_RELAY_BATCHSIZE: "5", OUTBOX_COLOUR_OF_THE_SKY: "blue" })
      const unread = warnings.filter((w) => w.includes("nothing in this process reads"))
      assert.strictEqual(unread.length, 1, warnings.join("\n"))
      assert.include(unread[0]!, "OUTBOX_RELAY_BATCHSIZE (did you mean OUTBOX_RELAY_BATCH_SIZE?)")
      assert.include(unread[0]!, "OUTBOX_COLOUR_OF_THE_SKY")
      assert.notInclude(unread[0]!, "OUTBOX_RELAY_BATCH_SIZE,")

      warnings.length = 0
      yield* build({ OUTBOX_RELAY_BATCH_SIZE: "5", OUTBOX_RELAY_LEASE: "1 minute" })
      assert.deepStrictEqual(
        warnings.filter((w) => w.includes("nothing in this process reads")),
        []
      )
    })
  )

  it.live("enqueued events are published and consumed exactly once by a declared consumer", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const allSeen = yield* Deferred.make<void>()
      const greeter = OutboxRuntime.consumer(
        Topic.consumer(Greetings, {
          groupId: "greeter",
          fromBeginning: true,
          handler: (message) =>
            Effect.sync(() => {
              seen.push(`${message.payload.to}#${message.payload.n}`)
              if (seen.length === 3) Deferred.doneUnsafe(allSeen, Effect.void)
            })
        })
      )
      const portsLayer = ports()
      const runtime = OutboxRuntime.layer({ relay: fast, consumers: [greeter] }).pipe(Layer.provideMerge(portsLayer))

      const rows = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Outbox.withTransaction(
            Topic.enqueueAll(Greetings, [
              { to: "ada", n: 1 },
              { to: "ada", n: 2 }
            ])
          )
          yield* Topic.enqueueAutocommit(Greetings, { to: "bob", n: 1 })
          yield* Deferred.await(allSeen).pipe(Effect.timeout("20 seconds"))
          const info = yield* OutboxRuntime.OutboxRuntime
          assert.strictEqual(info.relays.length, 1)
          assert.deepStrictEqual(info.consumers, ["greeter"])
          // Give the consumer time to finish the lifecycle transitions.
          const store = yield* OutboxStore
          for (let i = 0; i < 100; i++) {
            const stats = yield* store.stats(Date.now())
            if (stats.byStatus.SUCCESS === 3) break
            yield* Effect.sleep("20 millis")
          }
          return yield* store.stats(Date.now())
        })
      ).pipe(Effect.provide(runtime))

      assert.deepStrictEqual(
        seen.filter((s) => s.startsWith("ada")),
        ["ada#1", "ada#2"]
      )
      assert.strictEqual(seen.length, 3)
      assert.deepStrictEqual(rows.byStatus, { SUCCESS: 3 })
    }).pipe(Effect.provide(env({})))
  )

  it.live("settings come from Config: relay instances, and parts switched off", () =>
    Effect.gen(function* () {
      const info = (values: Record<string, string>) =>
        Effect.scoped(
          Effect.gen(function* () {
            return yield* OutboxRuntime.OutboxRuntime
          }).pipe(Effect.provide(OutboxRuntime.layer().pipe(Layer.provide(ports()), Layer.provide(env(values)))))
        )

      const three = yield* info({
        OUTBOX_RELAY_INSTANCES: "3",
        OUTBOX_RELAY_OWNER: "node-a",
        OUTBOX_RETENTION_ENABLED: "false"
      })
      assert.deepStrictEqual(three.relays, ["node-a-1", "node-a-2", "node-a-3"])
      assert.strictEqual(three.settings.retention, false)
      assert.notStrictEqual(three.settings.staleRecovery, false)

      const none = yield* info({
        OUTBOX_RELAY_ENABLED: "false",
        OUTBOX_STALE_RECOVERY_ENABLED: "false",
        OUTBOX_INBOX_RETENTION: "off"
      })
      assert.deepStrictEqual(none.relays, [])
      assert.strictEqual(none.settings.staleRecovery, false)
      assert.strictEqual(none.settings.inboxRetention, false)

      const bad = yield* Effect.exit(info({ OUTBOX_RELAY_INSTANCES: "0" }))
      assert.isTrue(Exit.isFailure(bad))
      assert.include(String(Exit.isFailure(bad) ? bad.cause : ""), "OUTBOX_RELAY_INSTANCES")

      // The start-up check: 10 s and no auto-creation by default; "off" skips it.
      assert.deepStrictEqual(three.settings.brokerStartupTimeout, Duration.seconds(10))
      assert.strictEqual(three.settings.autoCreateTopics, false)
      const unchecked = yield* info({ OUTBOX_BROKER_STARTUP_TIMEOUT: "off", OUTBOX_AUTO_CREATE_TOPICS: "true" })
      assert.strictEqual(unchecked.settings.brokerStartupTimeout, false)
      assert.strictEqual(unchecked.settings.autoCreateTopics, true)
      const shorter = yield* info({ OUTBOX_BROKER_STARTUP_TIMEOUT: "3 seconds" })
      assert.deepStrictEqual(shorter.settings.brokerStartupTimeout, Duration.seconds(3))
      const typo = yield* Effect.exit(info({ OUTBOX_BROKER_STARTUP_TIMEOUT: "soon" }))
      assert.include(String(Exit.isFailure(typo) ? typo.cause : ""), 'OUTBOX_BROKER_STARTUP_TIMEOUT: "soon"')
    })
  )

  it.live("explicit options win over Config", () =>
    Effect.gen(function* () {
      const settings = yield* Effect.scoped(
        Effect.map(Effect.service(OutboxRuntime.OutboxRuntime), (info) => info.settings)
      ).pipe(
        Effect.provide(
          OutboxRuntime.layer({ relay: false, runConsumers: false }).pipe(
            Layer.provide(ports()),
            Layer.provide(env({ OUTBOX_RELAY_INSTANCES: "4", OUTBOX_CONSUMERS_ENABLED: "true" }))
          )
        )
      )
      assert.strictEqual(settings.relay, false)
      assert.strictEqual(settings.runConsumers, false)
    })
  )

  it.live("closing the layer stops relays and consumers: nothing is published or consumed afterwards", () =>
    Effect.gen(function* () {
      let handled = 0
      const consumer = OutboxRuntime.consumer(
        Topic.consumer(Greetings, {
          groupId: "greeter",
          fromBeginning: true,
          handler: () => Effect.sync(() => void handled++)
        })
      )
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        OutboxRuntime.layer({ relay: fast, consumers: [consumer] }).pipe(Layer.provideMerge(ports())),
        scope
      )
      yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 1 }).pipe(Effect.provideContext(context))
      const store = Context.get(context, OutboxStore)
      for (let i = 0; i < 200 && handled === 0; i++) yield* Effect.sleep("10 millis")
      assert.strictEqual(handled, 1)
      for (let i = 0; i < 200; i++) {
        if ((yield* store.stats(Date.now())).byStatus.SUCCESS === 1) break
        yield* Effect.sleep("10 millis")
      }
      yield* Scope.close(scope, Exit.void)
      // The in-memory storage outlives the runtime: an event enqueued now is left PENDING.
      const broker = Context.get(context, InMemoryBroker.InMemoryBroker)
      const before = (yield* broker.records("greetings")).length
      yield* Topic.enqueueAutocommit(Greetings, { to: "bob", n: 1 }).pipe(Effect.provideContext(context))
      yield* Effect.sleep("300 millis")
      assert.strictEqual((yield* broker.records("greetings")).length, before)
      assert.strictEqual(handled, 1)
      const stats = yield* store.stats(Date.now())
      assert.deepStrictEqual(stats.byStatus, { SUCCESS: 1, PENDING: 1 })
    }).pipe(Effect.provide(env({})))
  )

  it.live("a consumer that stops on an error is started again: its records are not left unread", () =>
    Effect.gen(function* () {
      const seen: Array<number> = []
      const consumer = OutboxRuntime.consumer(
        Topic.consumer(Greetings, {
          groupId: "greeter",
          fromBeginning: true,
          handler: (message) => Effect.sync(() => void seen.push(message.payload.n))
        })
      )
      // No dead-letter topic yet: dead-lettering the poison record stops the consumer.
      const portsLayer = Layer.mergeAll(
        InMemoryDatabase.layer,
        WakeUp.layerMemory,
        InMemoryBroker.layer({ topics: { greetings: 1 } })
      )
      const runtime = OutboxRuntime.layer({
        relay: fast,
        consumers: [consumer],
        consumerRestart: Duration.millis(50)
      }).pipe(Layer.provideMerge(portsLayer))
      yield* Effect.gen(function* () {
        const outbox = yield* Outbox.Outbox
        yield* outbox.withTransaction(
          outbox.enqueue([{ topic: "greetings", key: "ada", payload: new TextEncoder().encode("not json") }])
        )
        yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 2 })
        yield* Effect.sleep("400 millis")
        // Stuck behind the record it cannot dead-let: nothing after it was handled, nothing lost.
        assert.deepStrictEqual(seen, [])
        // Readiness says which consumer is down and why; liveness does not ask for a restart.
        const { health } = yield* OutboxRuntime.OutboxRuntime
        const greeter = (report: Health.Report) => report.checks.find((c) => c.name === "consumer greeter")
        let ready = yield* health.ready
        for (let i = 0; i < 200 && ready.ok; i++) ready = yield* Effect.andThen(Effect.sleep("10 millis"), health.ready)
        assert.isFalse(ready.ok)
        assert.match(greeter(ready)?.detail ?? "", /^stopped, restarting: /)
        assert.isTrue((yield* health.live).ok)
        const broker = yield* InMemoryBroker.InMemoryBroker
        yield* broker.createTopic("greetings.DLT", 1)
        for (let i = 0; i < 200 && seen.length === 0; i++) yield* Effect.sleep("20 millis")
        assert.deepStrictEqual(seen, [2])
        assert.strictEqual((yield* broker.records("greetings.DLT")).length, 1)
        assert.deepStrictEqual(greeter(yield* health.ready), { name: "consumer greeter", ok: true, detail: "running" })
      }).pipe(Effect.provide(runtime), Effect.scoped)
    }).pipe(Effect.provide(env({})), Effect.provideService(References.MinimumLogLevel, "None"))
  )

  it.effect("the gauges sample pending count, oldest pending age, stale leases and unfinished events", () =>
    Effect.gen(function* () {
      yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 1 })
      yield* TestClock.adjust("5 seconds")
      yield* Topic.enqueueAutocommit(Greetings, { to: "bob", n: 1 })
      yield* Transition.claim({ owner: "gone", limit: 1, maxPerKey: 1, leaseMillis: 1000 })
      yield* TestClock.adjust("2 seconds")
      yield* OutboxRuntime.sampleMetrics
      // ada's event was claimed (and its lease expired); bob's waits, 2 s old.
      assert.strictEqual((yield* Metric.value(Telemetry.pending)).value, 1)
      assert.strictEqual((yield* Metric.value(Telemetry.oldestPendingAge)).value, 2000)
      assert.strictEqual((yield* Metric.value(Telemetry.staleLeases)).value, 1)
      assert.strictEqual((yield* Metric.value(Telemetry.unfinished)).value, 2)
      const dispatching = Metric.withAttributes(Telemetry.eventsByStatus, { status: "DISPATCHING" })
      assert.strictEqual((yield* Metric.value(dispatching)).value, 1)
    }).pipe(Effect.provide(Outbox.layerWith({ maxPayloadBytes: 1000 }).pipe(Layer.provideMerge(ports()))))
  )

  it.effect("domain code gets Outbox and Inbox, never the raw Publisher", () =>
    Effect.sync(() => {
      const runtime = OutboxRuntime.layer().pipe(Layer.provide(ports()))
      type Provided = Layer.Success<typeof runtime>
      const publisherIsHidden: [Extract<Provided, Publisher>] extends [never] ? true : false = true
      const outboxIsThere: [Extract<Provided, Outbox.Outbox | Inbox>] extends [never] ? false : true = true
      assert.isTrue(publisherIsHidden && outboxIsThere)
    })
  )
})
