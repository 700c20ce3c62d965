// The engine is configuration: OUTBOX_ENGINE=log runs the log relay (and no claim relay), claim
// (the default) the claim relays (and not the log relay), and any other value is refused.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as InMemoryLog from "@effect-outbox/testing/InMemoryLog"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Health from "../src/Health.ts"
import * as OutboxEngine from "../src/OutboxEngine.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import * as Topic from "../src/Topic.ts"
import * as WakeUp from "../src/WakeUp.ts"

const Greeting = Schema.Struct({ to: Schema.String, n: Schema.Int })
const Greetings = Topic.make({ name: "greetings", schema: Greeting, key: (greeting) => greeting.to })

const env = (values: Record<string, string>) => ConfigProvider.layer(ConfigProvider.fromEnv({ env: values }))

const readEngine = (values: Record<string, string>) =>
  Effect.gen(function* () {
    return yield* OutboxEngine.config
  }).pipe(Effect.provide(env(values)), Effect.exit)

/**
 * Counts the calls of each `OutboxStore` method: the consumers' lifecycle reads and writes rows.
 * The health check's database probe (a lookup of `Health.probeEventId`, which no row has) is not
 * a row read and is not counted.
 */
const countingStore = (calls: Map<string, number>) =>
  Layer.effect(OutboxStore)(
    Effect.map(Effect.service(OutboxStore), (store) => {
      const counted: Record<string, unknown> = {}
      for (const [name, value] of Object.entries(store)) {
        counted[name] =
          typeof value === "function"
            ? (...args: Array<unknown>) => {
                const probe = name === "get" && args[0] === Health.probeEventId
                if (!probe) calls.set(name, (calls.get(name) ?? 0) + 1)
                return (value as (...a: Array<unknown>) => unknown)(...args)
              }
            : value
      }
      return counted as unknown as OutboxStore["Service"]
    })
  ).pipe(Layer.provideMerge(InMemoryDatabase.layer))

/** The claim engine's ports and the log engine's services, side by side: the engine picks. */
const ports = (log: InMemoryLog.Log, calls: Map<string, number>) =>
  Layer.mergeAll(
    // first, so the database's own Transactor (the inbox's transactions) wins over the log's
    InMemoryLog.layerWithWriter(log),
    countingStore(calls),
    WakeUp.layerMemory,
    InMemoryBroker.layer({ topics: { greetings: 2, "greetings.DLT": 1 } })
  )

/** Runs the runtime on `engine`, enqueues three greetings and waits for the consumer to see them. */
const runOn = (values: Record<string, string>, transaction: "per-record" | "per-batch" = "per-record") =>
  Effect.gen(function* () {
    const log = yield* InMemoryLog.make
    const calls = new Map<string, number>()
    const seen: Array<string> = []
    const allSeen = yield* Deferred.make<void>()
    const greeter = OutboxRuntime.consumer(
      Topic.consumer(Greetings, {
        groupId: "greeter",
        transaction,
        handler: (message) =>
          Effect.sync(() => {
            seen.push(`${message.payload.to}#${message.payload.n}`)
            if (seen.length === 3) Deferred.doneUnsafe(allSeen, Effect.void)
          })
      })
    )
    const runtime = OutboxRuntime.layer({
      relay: { pollInterval: Duration.millis(20), instances: 1 },
      logRelay: { pollInterval: "20 millis", idleWait: "100 millis" },
      consumers: [greeter]
    }).pipe(Layer.provideMerge(ports(log, calls)), Layer.provide(env(values)))
    return yield* Effect.scoped(
      Effect.gen(function* () {
        const lookupsBefore = (calls.get("get") ?? 0) + (calls.get("list") ?? 0) + (calls.get("transition") ?? 0)
        yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 1 })
        yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 2 })
        yield* Topic.enqueueAutocommit(Greetings, { to: "bob", n: 1 })
        yield* Deferred.await(allSeen).pipe(Effect.timeout("20 seconds"))
        const info = yield* OutboxRuntime.OutboxRuntime
        const store = yield* OutboxStore
        for (let i = 0; i < 100 && info.settings.engine === "claim"; i++) {
          if ((yield* store.stats(Date.now())).byStatus.SUCCESS === 3) break
          yield* Effect.sleep("20 millis")
        }
        return {
          info,
          seen,
          rows: (yield* store.stats(Date.now())).byStatus,
          log: yield* log.positions,
          claims: calls.get("claim") ?? 0,
          called: [...calls.keys()].sort(),
          rowReads: (calls.get("get") ?? 0) + (calls.get("list") ?? 0) + (calls.get("transition") ?? 0) - lookupsBefore
        }
      })
    ).pipe(Effect.provide(runtime))
  })

describe("OutboxEngine", () => {
  it.effect("OUTBOX_ENGINE is claim by default, case-insensitive, and a wrong value names the allowed ones", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* readEngine({}), Exit.succeed("claim"))
      assert.deepStrictEqual(yield* readEngine({ OUTBOX_ENGINE: " Log " }), Exit.succeed("log"))
      const bad = yield* readEngine({ OUTBOX_ENGINE: "wal" })
      assert.isTrue(Exit.isFailure(bad))
      const text = Exit.isFailure(bad) ? Cause.pretty(bad.cause) : ""
      assert.include(text, 'OUTBOX_ENGINE: "wal" is not an engine; use one of claim, log')
    })
  )

  it.live("OUTBOX_ENGINE=log: events go through the log relay, no claim relay runs, consumers read no rows", () =>
    Effect.gen(function* () {
      const run = yield* runOn({ OUTBOX_ENGINE: "log" })
      assert.strictEqual(run.info.settings.engine, "log")
      assert.deepStrictEqual(run.info.relays, ["log-relay"])
      assert.deepStrictEqual(run.info.consumers, ["greeter"])
      assert.deepStrictEqual(
        run.seen.filter((s) => s.startsWith("ada")),
        ["ada#1", "ada#2"]
      )
      // Three transactions in the log, all confirmed by the relay; nothing in the outbox table.
      assert.deepStrictEqual(run.log, { confirmed: 3, committed: 3 })
      assert.deepStrictEqual(run.rows, {})
      assert.strictEqual(run.claims, 0)
      // The consumer's lifecycle step is skipped: not one row looked up or moved.
      assert.strictEqual(run.rowReads, 0)
      // Of the store, only retention's purge ran (and this test's own stats): no claim, no
      // stale recovery, no reconciler sweep, no row gauges.
      assert.deepStrictEqual(
        run.called.filter((method) => method !== "purge" && method !== "stats"),
        []
      )
    })
  )

  it.live("OUTBOX_ENGINE=log: a per-batch consumer reads no rows either", () =>
    Effect.gen(function* () {
      const run = yield* runOn({ OUTBOX_ENGINE: "log" }, "per-batch")
      assert.sameMembers(run.seen, ["ada#1", "ada#2", "bob#1"])
      assert.strictEqual(run.rowReads, 0)
    })
  )

  it.live("OUTBOX_ENGINE=claim (the default): the claim relays publish the rows, the log stays untouched", () =>
    Effect.gen(function* () {
      const run = yield* runOn({})
      assert.strictEqual(run.info.settings.engine, "claim")
      assert.strictEqual(run.info.relays.length, 1)
      assert.notInclude(run.info.relays, "log-relay")
      assert.deepStrictEqual(run.log, { confirmed: 0, committed: 0 })
      assert.deepStrictEqual(run.rows, { SUCCESS: 3 })
      assert.isAbove(run.claims, 0)
      // Stale recovery runs beside the claim relays.
      assert.include(run.called, "acquireRecoveryLease")
    })
  )

  it.live("OUTBOX_ENGINE=log with relay: false runs no log relay here (another process publishes)", () =>
    Effect.gen(function* () {
      const log = yield* InMemoryLog.make
      const info = yield* Effect.scoped(Effect.service(OutboxRuntime.OutboxRuntime)).pipe(
        Effect.provide(
          OutboxRuntime.layer({ relay: false }).pipe(
            Layer.provide(ports(log, new Map())),
            Layer.provide(env({ OUTBOX_ENGINE: "log" }))
          )
        )
      )
      assert.deepStrictEqual(info.relays, [])
      assert.isFalse(yield* log.leased)
    })
  )

  it.live("a wrong OUTBOX_ENGINE fails the runtime's layer with the configuration error", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(runOn({ OUTBOX_ENGINE: "wal" }))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "use one of claim, log")
    })
  )

  it.live("OUTBOX_ENGINE=log without the log's services is a typed error naming what is missing", () =>
    Effect.gen(function* () {
      const exit = yield* Layer.build(
        OutboxRuntime.layer({ relay: false }).pipe(
          Layer.provide(Layer.mergeAll(InMemoryDatabase.layer, WakeUp.layerMemory, InMemoryBroker.layer())),
          Layer.provide(env({ OUTBOX_ENGINE: "log" }))
        )
      ).pipe(Effect.scoped, Effect.exit)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
      assert.instanceOf(error, OutboxEngine.LogEngineUnavailableError)
      assert.deepStrictEqual(error.missing, ["LogWriter", "LogSource"])
      assert.include(error.message, "PgOutbox.layerConfig")
    })
  )
})
