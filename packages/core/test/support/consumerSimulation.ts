// The deterministic simulation of the consuming side: a seeded producer publishes events (some
// duplicated, as a relay re-sending after a lost acknowledgement does; some poison), consumers
// run them through `Consumer` and crash at the worst moments (between the DB commit and the
// offset commit; inside the handler's open transaction), the database loses some commits (or
// their acknowledgements), and a final quiet consumer drains what is left. The checker then
// judges: each event's effect applied exactly once per consumer group, no record lost (every
// partition committed to its end), poison records in the DLT and only they, outbox rows
// SUCCESS / PUSHED_FAILURE, partitions kept moving.
//
// With `faults: "production"` each seed may also draw the faults that bite on the real services
// a PostgreSQL outage (shutting down, down, starting up, lost commit
// acknowledgements), a broker outage (refusing, timing out or frozen), partition growth that the
// group notices only at its metadata refresh, a group coordinator still loading, and rebalances
// with batches in flight; the checker adds "no delivered record skipped". `wrong` selects a
// deliberately wrong configuration that the checker must catch (the pre-fix behaviours).
//
// Determinism: every random choice comes from the seeded `Random` service or a PRNG seeded from
// the same seed; time comes from a fresh `TestClock` per run.

import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as References from "effect/References"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SqlError } from "effect/sql/SqlError"
import * as TestClock from "effect/testing/TestClock"
import * as Consumer from "../../src/Consumer.ts"
import { ConsumerSource, type Subscription } from "../../src/ConsumerSource.ts"
import { ConsumerSourceError, StoreError } from "../../src/Errors.ts"
import * as Inbox from "../../src/Inbox.ts"
import { type EventId, jsonPayload, makeEventId } from "../../src/OutboxMessage.ts"
import { OutboxStore } from "../../src/OutboxStore.ts"
import * as Transition from "../../src/Transition.ts"
import { chance, int, prng } from "./seeded.ts"

export interface Outcome {
  readonly seed: number
  readonly violations: ReadonlyArray<string>
  readonly summary: string
  /** Everything observable, for replay comparisons. */
  readonly fingerprint: string
}

type Kind = "ok" | "flaky" | "poison_decode" | "poison_permanent" | "poison_exhaust"

interface SimEvent {
  readonly n: number
  readonly id: EventId
  readonly key: string
  readonly kind: Kind
  readonly local: boolean
}

const isPoison = (kind: Kind) => kind.startsWith("poison")

class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", {
  n: Schema.Number,
  retriable: Schema.Boolean
}) {}

const GROUP = "sim-consumer"
const Payload = Schema.Struct({ n: Schema.Number })

/**
 * Deliberately wrong configurations, each a behaviour from before the production-fault fixes:
 * - `"latest-reset"`: the group starts partitions without a committed offset at their end
 *   (`fromBeginning: false`, H4): records on a grown topic's new partitions are skipped;
 * - `"driver-sql-errors"`: database errors classified by the driver alone (adapter-pg before the
 *   fix, H2): `57P03` / `57P01` while PostgreSQL shuts down are permanent, so healthy records
 *   are dead-lettered at once.
 */
export type WrongConfiguration = "latest-reset" | "driver-sql-errors"

export interface ScenarioOptions {
  /** `"classic"` (default): the faults CI has always rolled; `"production"` adds the production ones. */
  readonly faults?: "classic" | "production"
  readonly wrong?: WrongConfiguration
  /**
   * Key-ordered concurrency inside partitions (`concurrency: { by: "key" }`), with its handlers
   * per partition and window drawn from the seed; the checker adds "no key ever has two handlers
   * running" (effects in offset order per key is checked in every mode).
   */
  readonly keyConcurrency?: boolean
}

/**
 * The driver's own classification, as adapter-pg mapped database errors before the production-fault fixes: the
 * same report, retriable only when `@effect/sql-pg` says so (57P01 / 57P03 are not).
 */
const driverOnly = (operation: string) => (error: SqlError) => {
  const mapped = InMemoryDatabase.defaultSqlErrorMapping(operation)(error)
  return new StoreError({
    operation,
    reason: mapped.reason,
    kind: error.isRetryable ? "unavailable" : "permanent",
    cause: error
  })
}

/** Runs one seeded scenario and checks it. */
export const runConsumerScenario = (seed: number, options: ScenarioOptions = {}): Effect.Effect<Outcome> =>
  scenario(seed, options).pipe(
    // An infrastructure error escaping the scenario is a harness bug, not a finding: fail loudly.
    Effect.orDie,
    Effect.scoped,
    Random.withSeed(seed),
    Effect.provideService(References.MinimumLogLevel, "None"),
    Effect.provide(TestClock.layer())
  )

const scenario = (seed: number, scenarioOptions: ScenarioOptions) =>
  Effect.gen(function* () {
    const rand = prng(seed ^ 0x5bd1e995)
    // Production faults draw from their own generator: the classic draws stay as they were.
    const production = scenarioOptions.faults === "production"
    const plan = production ? productionPlan(prng(seed ^ 0x2545f491)) : undefined
    // ---- the scenario's shape ----------------------------------------------------------------
    const initialPartitions = yield* int(1, 3)
    let partitions = initialPartitions
    const database = yield* InMemoryDatabase.make
    const broker = yield* InMemoryBroker.make({
      topics: { orders: partitions, "orders.DLT": 1 },
      maxBatchSize: yield* int(1, 5),
      ...(plan === undefined
        ? {}
        : {
            metadataMaxAge: `${plan.metadataMaxAge} millis`,
            ...(plan.coordinatorLoad > 0 ? { coordinatorLoad: `${plan.coordinatorLoad} millis` } : {})
          })
    })
    const maxAttempts = yield* int(3, 5)
    // At most maxAttempts - 2 lost commits plus one flaky failure: a healthy record can never
    // exhaust its attempts on injected faults alone, so any healthy record in the DLT is a bug.
    const dbFaults = yield* int(0, maxAttempts - 2)
    const pCrashCommit = (yield* int(0, 3)) / 10
    const pCrashHandler = (yield* int(0, 2)) / 20
    const parking = yield* chance(0.25)
    const concurrency = yield* int(1, 3)
    const eventCount = yield* int(4, 12)
    const keyCount = yield* int(1, 4)
    const pDuplicate = (yield* int(0, 3)) / 10
    const maxGenerations = yield* int(1, 4)
    // By parity, so the random draws (and the per-record scenarios of odd seeds) stay as they were.
    const transaction = seed % 2 === 0 ? "per-batch" : "per-record"
    // Its own generator, so the other draws stay as they were.
    const keyed = scenarioOptions.keyConcurrency === true ? keyedPlan(prng(seed ^ 0x68e31da4)) : undefined

    const baseLayer = Layer.mergeAll(InMemoryDatabase.layerFrom(database), InMemoryBroker.layerFrom(broker))
    const worldLayer = Inbox.Inbox.layer.pipe(Layer.provideMerge(baseLayer))
    const store = database.outboxStore

    // ---- events and local outbox rows ---------------------------------------------------------
    const events: Array<SimEvent> = []
    for (let n = 0; n < eventCount; n++) {
      const roll = yield* Random.next
      const kind: Kind =
        roll < 0.72
          ? "ok"
          : roll < 0.84
            ? "flaky"
            : roll < 0.9
              ? "poison_decode"
              : roll < 0.95
                ? "poison_permanent"
                : "poison_exhaust"
      events.push({
        n,
        id: yield* makeEventId,
        key: `k${yield* int(0, keyCount - 1)}`,
        kind,
        local: yield* chance(0.4)
      })
    }
    const byId = new Map(events.map((e) => [e.id as string, e]))
    const locals = events.filter((e) => e.local)
    if (locals.length > 0) {
      yield* store.insert(
        locals.map((e) => ({
          id: e.id,
          topic: "orders",
          key: e.key,
          partition: null,
          headers: { "event-id": e.id },
          payload: jsonPayload({ n: e.n }),
          status: "PENDING" as const,
          availableAt: 0,
          createdAt: 0
        }))
      )
      const claimed = yield* Transition.claim({
        owner: "sim-relay",
        limit: 1000,
        maxPerKey: 1000,
        leaseMillis: 3_600_000
      }).pipe(Effect.provideService(OutboxStore, store), Effect.orDie)
      // Half are acknowledged; the rest stay DISPATCHING: the consumer runs ahead (R2.5).
      const published = claimed.filter(() => rand() < 0.5)
      yield* Transition.markPublished(
        published.map((row) => ({
          id: row.id,
          receipt: { topic: "orders", partition: 0, offset: "0" }
        }))
      ).pipe(Effect.provideService(OutboxStore, store), Effect.orDie)
    }

    // ---- database faults: lost commits and lost commit acknowledgements -----------------------
    for (let i = 0; i < dbFaults; i++) {
      yield* database.control.failNext({
        count: 1,
        operations: ["commit"],
        timing: (yield* chance(0.5)) ? "after" : "before",
        retriable: true,
        reason: "injected lost commit"
      })
    }

    // ---- the producer: events in order, some duplicated (adjacent or much later) ---------------
    const payloadOf = (e: SimEvent) =>
      e.kind === "poison_decode" ? new TextEncoder().encode(`{"n":"not a number ${e.n}"}`) : jsonPayload({ n: e.n })
    const publishOnce = (e: SimEvent) =>
      Effect.flatMap(
        broker.publisher.publish([
          {
            id: e.id,
            topic: "orders",
            key: e.key,
            partition: null,
            headers: { "event-id": e.id },
            payload: payloadOf(e)
          }
        ]),
        ([outcome]) =>
          outcome!._tag === "Success"
            ? Effect.void
            : production && outcome!.failure._tag === "BrokerUnavailableError"
              ? Effect.fail(outcome!.failure)
              : Effect.die(new Error("sim publish failed"))
      )
    // A producer rides out a broker outage by retrying (the relay does, without counting attempts).
    const publishOne = (e: SimEvent) =>
      production ? Effect.retry(publishOnce(e), { schedule: Schedule.spaced("50 millis") }) : publishOnce(e)
    let producerDone = false
    let totalSteps = 0
    let duplicates = 0
    const producer = Effect.gen(function* () {
      const later: Array<SimEvent> = []
      for (const e of events) {
        yield* Effect.sleep(`${yield* int(0, 30)} millis`)
        // Spread over the production faults' window, so they hit records in flight.
        if (plan !== undefined) yield* Effect.sleep(`${Math.floor(plan.spread())} millis`)
        yield* publishOne(e)
        if (yield* chance(pDuplicate)) {
          duplicates++
          if (yield* chance(0.5)) yield* publishOne(e)
          else later.push(e)
        }
      }
      for (const e of later) {
        yield* Effect.sleep(`${yield* int(0, 30)} millis`)
        yield* publishOne(e)
      }
      producerDone = true
    })
    yield* Effect.forkScoped(producer)

    // ---- the handler: a transactional effect per event -----------------------------------------
    // The effect is an outbox row of topic "effects" keyed by the consumed event id, written in
    // the handler's transaction: rolled back with it, so its count is the number of times the
    // effect was applied.
    let chaos = true
    let crashSignal = Deferred.makeUnsafe<void>()
    let crashes = 0
    const flakyFailed = new Set<string>()
    // Handlers running per key: more than one at a time is a violation.
    const runningByKey = new Map<string, number>()
    const overlaps: Array<string> = []
    const handler = (message: Consumer.Message<typeof Payload.Type>) =>
      Effect.suspend(() => {
        // Per partition: a grown topic moves a key to another partition, where it runs on its own.
        const key = `${message.record.partition}/${message.key ?? "null"}`
        const running = (runningByKey.get(key) ?? 0) + 1
        runningByKey.set(key, running)
        if (running > 1)
          overlaps.push(`key ${key} had ${running} handlers running at once (offset ${message.record.offset})`)
        return Effect.ensuring(
          handle(message),
          Effect.sync(() => runningByKey.set(key, runningByKey.get(key)! - 1))
        )
      })
    const handle = (message: Consumer.Message<typeof Payload.Type>) =>
      Effect.gen(function* () {
        const e = byId.get(message.eventId ?? "")
        if (e === undefined) return yield* Effect.die(new Error(`unknown event ${message.eventId}`))
        if (chaos && rand() < pCrashHandler) {
          crashes++
          yield* Deferred.succeed(crashSignal, undefined)
          return yield* Effect.never // frozen mid-transaction until the process is killed
        }
        if (e.kind === "flaky" && !flakyFailed.has(e.id)) {
          flakyFailed.add(e.id)
          return yield* new HandlerFailed({ n: e.n, retriable: true })
        }
        if (e.kind === "poison_permanent") return yield* new HandlerFailed({ n: e.n, retriable: false })
        if (e.kind === "poison_exhaust") return yield* new HandlerFailed({ n: e.n, retriable: true })
        yield* store.insert([
          {
            id: yield* makeEventId,
            topic: "effects",
            key: e.id,
            partition: null,
            headers: {},
            payload: jsonPayload({ applied: e.n }),
            status: "PENDING",
            availableAt: 0,
            createdAt: 0
          }
        ])
      })

    // A consumer source whose offset commits may "crash the process" right after the database
    // committed: the commit never happens and nothing of that member commits again.
    // While the driver shuts a generation down gracefully, commits go through: a crash is
    // injected only while the member runs.
    let closing = false
    // Every offset the broker handed to a consumer, per partition: "no delivered record skipped".
    const delivered = new Map<number, Set<number>>()
    const deliveredBatches = (subscription: Subscription) =>
      subscription.batches.pipe(
        Stream.tap((batch) =>
          Effect.sync(() => {
            const seen = delivered.get(batch.partition) ?? new Set<number>()
            for (const r of batch.records) seen.add(Number(r.offset))
            delivered.set(batch.partition, seen)
          })
        )
      )
    const trackedSource: ConsumerSource["Service"] = {
      subscribe: (options) =>
        Effect.map(broker.consumerSource.subscribe(options), (subscription) => ({
          ...subscription,
          batches: deliveredBatches(subscription)
        }))
    }
    const crashingSource = (): ConsumerSource["Service"] => {
      let crashed = false
      return {
        subscribe: (options) =>
          Effect.map(
            broker.consumerSource.subscribe(options),
            (subscription): Subscription => ({
              ...subscription,
              batches: deliveredBatches(subscription),
              commit: (offsets) =>
                Effect.suspend(() => {
                  if (crashed) {
                    return Effect.fail(
                      new ConsumerSourceError({ operation: "commit", reason: "process crashed", retriable: false })
                    )
                  }
                  if (chaos && !closing && rand() < pCrashCommit) {
                    crashed = true
                    crashes++
                    return Deferred.succeed(crashSignal, undefined).pipe(Effect.andThen(Effect.never))
                  }
                  return subscription.commit(offsets)
                })
            })
          )
      }
    }

    const options = {
      groupId: GROUP,
      topics: ["orders"],
      schema: Payload,
      fromBeginning: scenarioOptions.wrong !== "latest-reset",
      handler,
      maxAttempts,
      retrySchedule: Schedule.spaced("40 millis"),
      parking,
      concurrency: keyed === undefined ? concurrency : { by: "key" as const, ...keyed },
      transaction,
      shutdownTimeout: "100 millis"
    } as const

    const logEnds = Effect.gen(function* () {
      const ends: Array<number> = []
      for (let p = 0; p < partitions; p++) ends.push((yield* broker.control.log("orders", p)).length)
      return ends
    })
    const committedOffsets = Effect.map(broker.control.committed(GROUP), (commits) => {
      const byPartition = new Map(
        commits.filter((c) => c.topic === "orders").map((c) => [c.partition, Number(c.offset)])
      )
      return Array.from({ length: partitions }, (_, p) => byPartition.get(p) ?? 0)
    })
    const drained = (consumer: Consumer.Consumer) =>
      Effect.gen(function* () {
        if (!producerDone) return false
        const ends = yield* logEnds
        const committed = yield* committedOffsets
        const parkedPartitions = new Set((yield* consumer.parked).map((p) => p.partition))
        return ends.every((end, p) => committed[p] === end || parkedPartitions.has(p))
      })

    const closeWithClock = (scope: Scope.Closeable) =>
      Effect.gen(function* () {
        closing = true
        const fiber = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        for (let i = 0; i < 200; i++) {
          if ((yield* Fiber.await(fiber).pipe(Effect.timeoutOption(0)))._tag === "Some") {
            closing = false
            return
          }
          yield* TestClock.adjust("20 millis")
        }
        return yield* Effect.die(new Error("consumer shutdown hung"))
      })

    const runGeneration = (source: ConsumerSource["Service"], steps: number) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const start = Consumer.make(options).pipe(
          Scope.provide(scope),
          Effect.provide(Layer.merge(worldLayer, Layer.succeed(ConsumerSource)(source)))
        )
        // A consumer cannot join its group while the broker is down (refused: the process starts
        // again 100 ms later, as a supervisor restarts it; frozen: it waits, the clock moves on).
        const startOnce = Effect.gen(function* () {
          const fiber = yield* Effect.forkChild(Effect.exit(start))
          for (;;) {
            const done = yield* Fiber.await(fiber).pipe(Effect.timeoutOption(0))
            if (done._tag === "Some") return yield* Fiber.join(fiber)
            totalSteps++
            yield* TestClock.adjust("20 millis")
          }
        })
        let started = yield* startOnce
        while (production && Exit.isFailure(started) && String(started.cause).includes("ConsumerSourceError")) {
          totalSteps++
          yield* TestClock.adjust("100 millis")
          started = yield* startOnce
        }
        const consumer = yield* started
        let result: "crashed" | "drained" | "timeout" = "timeout"
        for (let i = 0; i < steps; i++) {
          totalSteps++
          if (yield* Deferred.isDone(crashSignal)) {
            result = "crashed"
            break
          }
          if (yield* drained(consumer)) {
            result = "drained"
            break
          }
          yield* TestClock.adjust("20 millis")
        }
        return { scope, consumer, result }
      })

    // ---- production faults, on the TestClock the generations move ---------------------------------
    if (scenarioOptions.wrong === "driver-sql-errors") yield* database.control.setSqlErrorMapping(driverOnly)
    const db = database.control
    const faultsFiber =
      plan === undefined
        ? undefined
        : yield* Effect.forkScoped(
            Effect.forEach(
              plan.steps,
              (step) =>
                Effect.andThen(
                  Effect.sleep(`${step.after} millis`),
                  Effect.gen(function* () {
                    switch (step._tag) {
                      case "db":
                        return yield* step.mode === "up"
                          ? db.recover
                          : db.outage({ mode: step.mode, lostCommitAcks: step.lostCommitAcks })
                      case "broker":
                        return yield* step.mode === "up"
                          ? broker.control.endOutage
                          : broker.control.outage({ mode: step.mode, timeout: "300 millis" })
                      case "grow":
                        partitions = initialPartitions + step.by
                        return yield* broker.control.createTopic("orders", partitions)
                      case "rebalance":
                        return yield* broker.control.rebalance(GROUP)
                    }
                  })
                ),
              { discard: true }
            )
          )

    // ---- chaos generations -----------------------------------------------------------------------
    let generations = 0
    for (let g = 0; g < maxGenerations; g++) {
      generations++
      crashSignal = Deferred.makeUnsafe<void>()
      const { result, scope } = yield* runGeneration(crashingSource(), 400)
      yield* closeWithClock(scope)
      if (result !== "crashed") break
    }

    // ---- quiet phase: no more crashes; release parked keys until everything is finished --------
    chaos = false
    crashSignal = Deferred.makeUnsafe<void>()
    if (faultsFiber !== undefined) {
      // The remaining faults play out (an outage always ends), then everything is up again.
      while ((yield* Fiber.await(faultsFiber).pipe(Effect.timeoutOption(0)))._tag === "None") {
        yield* TestClock.adjust("20 millis")
      }
      yield* db.recover
      yield* broker.control.endOutage
    }
    const quiet = yield* runGeneration(trackedSource, 2_000)
    // Parked keys are released as they appear (a later poison record may park its key again).
    let settled = false
    for (let i = 0; i < 1_000 && !settled; i++) {
      const parked = yield* quiet.consumer.parked
      for (const p of parked) {
        // `release` waits for the partition's worker, which may sleep on the TestClock.
        const releasing = yield* Effect.forkChild(quiet.consumer.release(p).pipe(Effect.orDie))
        while ((yield* Fiber.await(releasing).pipe(Effect.timeoutOption(0)))._tag === "None") {
          yield* TestClock.adjust("20 millis")
        }
      }
      settled = parked.length === 0 && (yield* drained(quiet.consumer))
      if (!settled) yield* TestClock.adjust("20 millis")
    }
    yield* closeWithClock(quiet.scope)

    // ---- the checker -----------------------------------------------------------------------------
    const violations: Array<string> = []
    if (!settled) violations.push("stuck: the quiet consumer never drained every partition")
    const ends = yield* logEnds
    const committed = yield* committedOffsets
    ends.forEach((end, p) => {
      if (committed[p] !== end) violations.push(`lost: partition ${p} committed ${committed[p]} of ${end} records`)
      const seen = delivered.get(p) ?? new Set<number>()
      const skipped = Array.from({ length: end }, (_, offset) => offset).filter((offset) => !seen.has(offset))
      if (skipped.length > 0) {
        violations.push(`skipped: partition ${p} never delivered offsets ${skipped.slice(0, 10).join(", ")}`)
      }
    })
    const rows = yield* database.control.rows
    const applied = new Map<string, number>()
    for (const row of rows) if (row.topic === "effects") applied.set(row.key!, (applied.get(row.key!) ?? 0) + 1)
    const dlt = yield* broker.control.records("orders.DLT")
    const deadIds = new Set(dlt.map((r) => r.headers["event-id"]))
    const status = new Map(rows.map((row) => [row.id as string, row.status]))
    for (const e of events) {
      const count = applied.get(e.id) ?? 0
      const poison = isPoison(e.kind)
      if (poison && count !== 0) violations.push(`poison event ${e.n} (${e.kind}) applied ${count} times`)
      if (!poison && count !== 1) violations.push(`event ${e.n} (${e.kind}) applied ${count} times, expected once`)
      if (poison && !deadIds.has(e.id)) violations.push(`poison event ${e.n} (${e.kind}) is not in the DLT`)
      if (!poison && deadIds.has(e.id)) {
        const dead = dlt.find((r) => r.headers["event-id"] === e.id)!.headers
        violations.push(
          `healthy event ${e.n} (${e.kind}) was dead-lettered (${dead["dlt-classification"]}, ` +
            `${dead["dlt-attempts"]} attempt(s): ${dead["dlt-error-message"]?.slice(0, 160)})`
        )
      }
      if (e.local) {
        const expected = poison ? "PUSHED_FAILURE" : "SUCCESS"
        if (status.get(e.id) !== expected) {
          violations.push(`outbox row of event ${e.n} (${e.kind}) ended ${status.get(e.id)}, expected ${expected}`)
        }
      }
    }
    violations.push(...overlaps.slice(0, 5))
    // Effects per key in offset order, per partition (the producer publishes each key's events in
    // order; a grown topic sends later events of a key elsewhere): only events all of whose copies
    // are on one partition are compared.
    const partitionsOf = new Map<string, Set<number>>()
    for (let p = 0; p < partitions; p++) {
      for (const record of yield* broker.control.log("orders", p)) {
        const id = record.headers["event-id"] ?? ""
        partitionsOf.set(id, (partitionsOf.get(id) ?? new Set()).add(p))
      }
    }
    const lastByKey = new Map<string, number>()
    for (const row of rows) {
      const e = row.topic === "effects" ? byId.get(row.key!) : undefined
      const on = e === undefined ? undefined : partitionsOf.get(e.id)
      if (e === undefined || on === undefined || on.size !== 1) continue
      const key = `${[...on][0]}/${e.key}`
      const last = lastByKey.get(key)
      if (last !== undefined && last > e.n) violations.push(`key ${key}: event ${e.n} applied after event ${last}`)
      lastByKey.set(key, Math.max(last ?? -1, e.n))
    }
    for (const record of dlt) {
      const e = byId.get(record.headers["event-id"] ?? "")
      if (e === undefined) violations.push("a DLT record without a known event id")
      else if (record.key !== e.key) violations.push(`DLT record of event ${e.n} lost its key`)
    }

    const summary =
      `seed ${seed}: ${eventCount} events (${events.filter((e) => isPoison(e.kind)).length} poison, ` +
      `${duplicates} duplicated), ${partitions} partitions, ${generations} generations, ${crashes} crashes, ` +
      `${dbFaults} lost commits, maxAttempts ${maxAttempts}, parking ${parking}, ${transaction}, dlt ${dlt.length}, steps ${totalSteps}` +
      (keyed === undefined ? "" : `; key concurrency ${keyed.perPartition} (maxHeld ${keyed.maxHeld})`) +
      (plan === undefined ? "" : `; production faults: ${plan.describe}`) +
      (scenarioOptions.wrong === undefined ? "" : `; wrong configuration: ${scenarioOptions.wrong}`)
    const fingerprint = JSON.stringify({
      committed,
      ends,
      dlt: dlt.map((r) => [r.headers["event-id"], r.headers["dlt-attempts"], r.timestamp]),
      applied: [...applied.entries()].sort(),
      history: (yield* database.control.history).map((c) => [c.id, c.from, c.to])
    })
    return { seed, violations, summary, fingerprint }
  })

/** Key concurrency's draws: handlers per partition and a small window (so it fills). */
const keyedPlan = (rand: () => number) => ({
  perPartition: 1 + Math.floor(rand() * 4),
  maxHeld: 1 + Math.floor(rand() * 8)
})

// ---- production faults ---------------------------------------------------------------

type FaultStep =
  | { readonly _tag: "db"; readonly mode: InMemoryDatabase.OutageMode | "up"; readonly lostCommitAcks: number }
  | { readonly _tag: "broker"; readonly mode: InMemoryBroker.OutageMode | "up" }
  | { readonly _tag: "grow"; readonly by: number }
  | { readonly _tag: "rebalance" }

interface ProductionPlan {
  /** The group's metadata refresh delay: a grown partition is noticed this late. */
  readonly metadataMaxAge: number
  /** How long the fresh broker's coordinator loads (0: ready at once). */
  readonly coordinatorLoad: number
  /** Fault steps in time order, each `after` millis after the previous one. */
  readonly steps: ReadonlyArray<FaultStep & { readonly after: number }>
  /** Extra delay between produced events, spreading them over the faults' window. */
  readonly spread: () => number
  readonly describe: string
}

/**
 * The production faults of one seed. Outages last up to seconds: far longer than the consumer's
 * retry budget here (3 to 5 tries 40 ms apart).
 */
const productionPlan = (rand: () => number): ProductionPlan => {
  const between = (min: number, max: number) => min + Math.floor(rand() * (max - min + 1))
  const timeline: Array<{ readonly at: number; readonly step: FaultStep }> = []
  const described: Array<string> = []
  if (rand() < 0.4) {
    const at = between(50, 600)
    const by = between(1, 2)
    timeline.push({ at, step: { _tag: "grow", by } })
    described.push(`grow +${by} at ${at} ms`)
  }
  if (rand() < 0.5) {
    const at = between(100, 900)
    const shutdown = between(30, 200)
    const down = between(300, 3_000)
    const startup = between(100, 600)
    const lostCommitAcks = between(0, 1)
    timeline.push(
      { at, step: { _tag: "db", mode: "shutdown", lostCommitAcks } },
      { at: at + shutdown, step: { _tag: "db", mode: "down", lostCommitAcks: 0 } },
      { at: at + shutdown + down, step: { _tag: "db", mode: "startup", lostCommitAcks: 0 } },
      { at: at + shutdown + down + startup, step: { _tag: "db", mode: "up", lostCommitAcks: 0 } }
    )
    described.push(`database out at ${at} ms for ${shutdown + down + startup} ms (${lostCommitAcks} lost commit acks)`)
  }
  if (rand() < 0.4) {
    const modes: ReadonlyArray<InMemoryBroker.OutageMode> = ["refuse", "timeout", "freeze"]
    const mode = modes[between(0, 2)]!
    const at = between(100, 900)
    const duration = between(300, 3_000)
    timeline.push({ at, step: { _tag: "broker", mode } }, { at: at + duration, step: { _tag: "broker", mode: "up" } })
    described.push(`broker ${mode} at ${at} ms for ${duration} ms`)
  }
  if (rand() < 0.4) {
    for (let i = between(1, 2); i > 0; i--) {
      const at = between(50, 1_500)
      timeline.push({ at, step: { _tag: "rebalance" } })
      described.push(`rebalance at ${at} ms`)
    }
  }
  const coordinatorLoad = rand() < 0.3 ? between(200, 1_500) : 0
  if (coordinatorLoad > 0) described.push(`coordinator loads ${coordinatorLoad} ms`)
  const metadataMaxAge = between(1_000, 3_000)
  timeline.sort((a, b) => a.at - b.at)
  let previous = 0
  const steps = timeline.map(({ at, step }) => {
    const after = at - previous
    previous = at
    return { ...step, after }
  })
  return {
    metadataMaxAge,
    coordinatorLoad,
    steps,
    spread: () => rand() * 80,
    describe: described.length === 0 ? "none drawn" : described.join(", ")
  }
}
