// The deterministic simulation of the outbox pipeline: seeded enqueuers (some transactions roll
// back), several relays that crash or stall at named points, stale recovery that crashes too,
// random broker and database faults, all on the in-memory layers and the TestClock. After a
// quiet phase (faults off) the invariant checker judges what is left.
//
// With `faults: "production"` each seed may also draw the faults that bite on the real services
// a broker outage longer than the relay's retry budget (refusing, timing out, or
// frozen then appending late), a PostgreSQL outage (shutdown, down, startup, lost commit
// acknowledgements), partition growth, and bursts of large records on a hot key against a small
// `max.message.bytes` (C1); the checker then adds "no FAILURE that no fault of the record itself
// explains" (an outage must not spend a record's attempts, H1; a batch over the size limit must
// not fail records that fit, C1).
//
// Determinism: every random choice comes from the seeded `Random` service or from a PRNG seeded
// from the same seed; time and fiber scheduling come from a fresh `TestClock` layer per run.

import type * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import type * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as OutboxInvariants from "@effect-outbox/testing/OutboxInvariants"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import * as References from "effect/References"
import * as TestClock from "effect/testing/TestClock"
import type { BrokerAdmin } from "../../src/BrokerAdmin.ts"
import { StoreError } from "../../src/Errors.ts"
import * as Lifecycle from "../../src/Lifecycle.ts"
import * as Outbox from "../../src/Outbox.ts"
import { type EventId, makeEventId, type OutboxDraft, type OutboxMessage } from "../../src/OutboxMessage.ts"
import type { OutboxStore } from "../../src/OutboxStore.ts"
import { Publisher } from "../../src/Publisher.ts"
import * as RecordSize from "../../src/RecordSize.ts"
import * as Relay from "../../src/Relay.ts"
import * as StaleRecovery from "../../src/StaleRecovery.ts"
import * as Transition from "../../src/Transition.ts"
import { makeWorld } from "./outboxEnv.ts"
import { chance, int, prng } from "./seeded.ts"

/** A relay loop under test: runs until interrupted, as lease owner `owner`. */
export type RelayLoop = (
  owner: string,
  settings: Partial<Relay.Settings>
) => Effect.Effect<void, never, OutboxStore | Publisher | BrokerAdmin>

export const goodRelay: RelayLoop = (owner, settings) =>
  Effect.flatMap(Relay.make({ ...settings, owner }), (relay) => relay.run)

/**
 * Oversized records on a hot key (C1): the topic's `max.message.bytes` is small, and bursts of
 * large records on one key are enqueued, so that a relay batch holding several of them is over
 * the limit although each record fits; maybe one record too large even alone (the outbox's own
 * limit is set above the topic's, a misconfiguration the broker then catches).
 */
export interface OversizePlan {
  /** The broker's record-batch limit. */
  readonly maxMessageBytes: number
  /** The outbox's enqueue limit (above `maxMessageBytes`, so a lone oversized record reaches the broker). */
  readonly maxRecordBytes: number
  /** In time order; `after`: millis after the previous burst. Payload sizes of the hot key's records. */
  readonly bursts: ReadonlyArray<{ readonly after: number; readonly sizes: ReadonlyArray<number> }>
  readonly describe: string
}

/** Draws a seed's oversize plan from its own generator, or none. */
export type OversizeHook = (rand: () => number) => OversizePlan | undefined

/**
 * A third of the seeds: a limit of 2–6 KB, 1–3 bursts of 2–8 records of a quarter to 70% of the
 * limit each on key `k0`; in a fifth of those, the last burst also holds one record over the
 * limit alone.
 */
export const hotKeyBursts: OversizeHook = (rand) => {
  if (rand() >= 1 / 3) return undefined
  const between = (min: number, max: number) => min + Math.floor(rand() * (max - min + 1))
  const maxMessageBytes = between(2_000, 6_000)
  const count = between(1, 3)
  const lone = rand() < 0.2
  const bursts = Array.from({ length: count }, (_, i) => {
    const sizes = Array.from({ length: between(2, 8) }, () => Math.round(maxMessageBytes * (0.25 + rand() * 0.45)))
    if (lone && i === count - 1) sizes.splice(between(0, sizes.length), 0, Math.round(maxMessageBytes * 1.2))
    return { after: between(0, 600), sizes }
  })
  const describe =
    `oversized: max.message.bytes ${maxMessageBytes}, bursts on k0 of ` +
    bursts.map((b) => `${b.sizes.length}`).join("+") +
    (lone ? " (one record over the limit alone)" : "")
  return { maxMessageBytes, maxRecordBytes: maxMessageBytes * 2, bursts, describe }
}

export interface ScenarioOptions {
  readonly staleRecovery?: boolean
  /** `"classic"` (default): the faults CI has always rolled; `"production"` adds the production ones. */
  readonly faults?: "classic" | "production"
  /** Oversized records on a hot key; default with production faults: {@link hotKeyBursts}. */
  readonly oversize?: OversizeHook
  /**
   * A deliberately wrong broker model (`"whole-call-batch"`: the publisher before the fix of C1),
   * to prove the checker catches it.
   */
  readonly wrongBroker?: InMemoryBroker.Options["wrong"]
}

export interface Outcome {
  readonly seed: number
  readonly violations: ReadonlyArray<OutboxInvariants.Violation>
  /** Production-fault findings: FAILURE rows that only an outage explains. */
  readonly findings: ReadonlyArray<string>
  readonly summary: string
  /** Everything observable, for replay comparisons. */
  readonly fingerprint: string
  readonly stats: {
    readonly crashPoint: Relay.CrashPoint
    readonly crashes: number
    readonly stalls: number
    readonly recoveryCrashes: number
    readonly rolledBack: number
    readonly failures: number
    /** Records on the broker more than once (at-least-once at work). */
    readonly duplicates: number
    readonly lostAcks: number
    /** Rows a consumer finished (SUCCESS / PUSHED_FAILURE). */
    readonly processed: number
    /** Claims a relay made while an earlier batch of its own was still publishing (pipelining). */
    readonly overlaps: number
  }
}

const CRASH_POINTS: ReadonlyArray<Relay.CrashPoint> = ["afterClaim", "afterPublish", "afterMark"]

/** Runs one seeded scenario and checks it. */
export const runScenario = (
  seed: number,
  relayLoop: RelayLoop = goodRelay,
  options: ScenarioOptions = {}
): Effect.Effect<Outcome> =>
  scenario(seed, relayLoop, options.staleRecovery ?? true, options).pipe(
    Effect.scoped,
    Random.withSeed(seed),
    // Logging every transition of a thousand runs costs more than the runs; failures print the seed.
    Effect.provideService(References.MinimumLogLevel, "Error"),
    Effect.provide(TestClock.layer())
  )

const scenario = (seed: number, relayLoop: RelayLoop, staleRecovery: boolean, options: ScenarioOptions) =>
  Effect.gen(function* () {
    const rand = prng(seed ^ 0x9e3779b9)
    // Production faults draw from their own generator: the classic draws stay as they were.
    const plan = options.faults === "production" ? relayFaultPlan(prng(seed ^ 0x68e31da4)) : undefined
    const oversizeHook = options.oversize ?? (options.faults === "production" ? hotKeyBursts : undefined)
    const oversize = oversizeHook?.(prng(seed ^ 0x1b873593))
    // ---- the scenario's shape ----------------------------------------------------------------
    const partitions = yield* int(1, 3)
    const world = yield* makeWorld(
      { orders: partitions },
      {
        broker: {
          ...(oversize === undefined ? {} : { maxMessageBytes: oversize.maxMessageBytes }),
          ...(options.wrongBroker === undefined ? {} : { wrong: options.wrongBroker })
        },
        ...(oversize === undefined ? {} : { maxRecordBytes: oversize.maxRecordBytes })
      }
    )
    const keyCount = yield* int(1, 4)
    const keys = Array.from({ length: keyCount }, (_, i) => `k${i}`)
    const explicitPartitions = yield* chance(0.25)
    const missingPartitionKey = explicitPartitions && (yield* chance(0.3))
    const unknownPartition: Relay.UnknownPartitionPolicy = (yield* chance(0.5)) ? "sync" : "fail"
    const enqueuers = yield* int(1, 3)
    const txPerEnqueuer = yield* int(2, 8)
    const relays = yield* int(1, 3)
    const lease = 1_000
    // From the seed rather than draws, so the other draws stay as they were: a third of the runs
    // keep one batch at a time, the rest pipeline; a publish takes 0, 5 or 30 ms (on the
    // TestClock), so batches of one relay really overlap.
    const pipelineDepth = 1 + (seed % 3)
    const publishLatency = [0, 5, 30][Math.floor(seed / 3) % 3]!
    const settings: Partial<Relay.Settings> = {
      pipelineDepth,
      batchSize: yield* int(1, 6),
      maxPerKey: yield* int(1, 4),
      lease: Duration.millis(lease),
      publishTimeout: Duration.millis(400),
      pollInterval: Duration.millis(100),
      maxAttempts: yield* int(3, 6),
      backoff: Relay.backoff("20 millis", "200 millis"),
      unknownPartition
    }
    const pRollback = (yield* int(0, 3)) / 10
    const pPublishFault = (yield* int(0, 3)) / 10
    const pDbFault = (yield* int(0, 2)) / 20
    const crashPoint = CRASH_POINTS[yield* int(0, CRASH_POINTS.length - 1)]!
    const pCrash = (yield* int(0, 3)) / 10
    const pStall = (yield* int(0, 2)) / 10
    const pRecoveryCrash = (yield* int(0, 3)) / 10
    const consumerAhead = yield* chance(0.5)

    const db = world.database.control
    const broker = world.broker.control
    const chaos = yield* Ref.make(true)

    // ---- faults ------------------------------------------------------------------------------
    const publishFaults: ReadonlyArray<InMemoryBroker.PublishFault> = [
      "retriable",
      "lost_ack",
      "lost_ack",
      "retriable",
      "permanent",
      "unknown_partition"
    ]
    // Records a fault of their own hit: their FAILURE is explained (a production-fault check).
    const faulted = new Set<string>()
    yield* broker.setPublishHook((batch) => {
      if (rand() >= pPublishFault) return undefined
      const fault = publishFaults[Math.floor(rand() * publishFaults.length)]!
      for (const request of batch.requests) faulted.add(request.id)
      // An injected unknown partition on a partition that exists models stale producer metadata.
      return fault
    })
    const relayOperations: ReadonlyArray<InMemoryDatabase.Operation> = [
      "outbox.claim",
      "outbox.transition",
      "outbox.findStale"
    ]
    yield* db.setFaultHook((operation) =>
      relayOperations.includes(operation) && rand() < pDbFault
        ? new StoreError({ operation, reason: "injected database fault", kind: "unavailable" })
        : undefined
    )

    // Lost database acknowledgements: the write happened, the caller is told it failed (a claim
    // the relay never hears of, a settle it thinks failed, a commit the enqueuer thinks failed).
    let lostAcks = 0
    const lostAckOperations: ReadonlyArray<InMemoryDatabase.Operation> = ["outbox.claim", "outbox.transition", "commit"]
    yield* Effect.forkScoped(
      Effect.gen(function* () {
        while (yield* Ref.get(chaos)) {
          yield* Effect.sleep(Duration.millis(yield* int(50, 400)))
          if ((yield* Ref.get(chaos)) && (yield* chance(pDbFault * 4))) {
            lostAcks++
            const operation = lostAckOperations[yield* int(0, lostAckOperations.length - 1)]!
            yield* db.failNext({
              count: 1,
              operations: [operation],
              timing: "after",
              reason: "injected lost acknowledgement"
            })
          }
        }
      })
    )

    // ---- enqueuers ---------------------------------------------------------------------------
    let logical = 0
    const transactions: Array<OutboxInvariants.EnqueueTransaction> = []
    const draftOf = (key: string | null, size = 0) =>
      Effect.gen(function* () {
        const index = key === null ? -1 : keys.indexOf(key)
        const partition =
          !explicitPartitions || key === null
            ? null
            : missingPartitionKey && index === 0
              ? partitions // does not exist (yet)
              : index % partitions
        const id = yield* makeEventId
        const text = new TextEncoder().encode(`${key}:${id}`)
        const payload = size <= text.length ? text : new Uint8Array(size).fill(0x2e)
        payload.set(text)
        return { id, topic: "orders", key, partition, payload } satisfies OutboxDraft
      })
    const enqueueOne = Effect.gen(function* () {
      yield* Effect.sleep(Duration.millis(yield* int(0, 150)))
      const count = yield* int(1, 3)
      const drafts: Array<OutboxDraft> = []
      for (let i = 0; i < count; i++) {
        drafts.push(yield* draftOf((yield* chance(0.1)) ? null : keys[yield* int(0, keys.length - 1)]!))
      }
      yield* enqueueTransaction(drafts)
    })
    /** One enqueue transaction (rolled back at random unless `mayRollBack` is false); whether it committed. */
    const enqueueTransaction = (drafts: ReadonlyArray<OutboxDraft>, mayRollBack = true) =>
      Effect.gen(function* () {
        const draftKeys = drafts.map((d) => d.key ?? null)
        const rollback = mayRollBack && (yield* chance(pRollback))
        const holdOpen = (yield* chance(0.3)) ? yield* int(1, 80) : 0
        const begin = ++logical
        const exit = yield* Effect.exit(
          Outbox.withTransaction(
            Effect.gen(function* () {
              yield* Outbox.enqueue(drafts)
              if (holdOpen > 0) yield* Effect.sleep(Duration.millis(holdOpen))
              if (rollback) return yield* Effect.fail("rollback" as const)
            })
          )
        )
        const end = ++logical
        if (process.env.SIM_DEBUG !== undefined && exit._tag === "Failure")
          console.log("enqueue failed", String(exit.cause))
        transactions.push({ ids: drafts.map((d) => d.id!), keys: draftKeys, begin, end })
        return exit._tag === "Success"
      })
    // Oversized bursts on the hot key k0, each in one transaction (so one claim can take several).
    const bursts =
      oversize === undefined
        ? []
        : [
            Effect.forEach(
              oversize.bursts,
              (burst) =>
                Effect.gen(function* () {
                  yield* Effect.sleep(Duration.millis(burst.after))
                  // Retried as an application would (fresh events each time) while the database is out.
                  for (let attempt = 0; attempt < 30; attempt++) {
                    const drafts = yield* Effect.forEach(burst.sizes, (size) => draftOf("k0", size))
                    if (yield* enqueueTransaction(drafts, false)) return
                    yield* Effect.sleep(Duration.millis(200))
                  }
                }),
              { discard: true }
            )
          ]
    let enqueuersDone = 0
    const enqueuing = [
      ...Array.from({ length: enqueuers }, () => Effect.repeat(enqueueOne, { times: txPerEnqueuer - 1 })),
      ...bursts
    ]
    yield* Effect.forEach(enqueuing, (enqueuer) =>
      Effect.forkScoped(Effect.provide(enqueuer.pipe(Effect.ensuring(Effect.sync(() => enqueuersDone++))), world.layer))
    )

    // ---- relays with crashes and stalls --------------------------------------------------------
    let crashes = 0
    let stalls = 0
    let overlaps = 0
    const publishing = new Map<string, number>() // per owner: batches claimed, not yet published
    const relaySlot = (slot: number) =>
      Effect.gen(function* () {
        for (let generation = 0; ; generation++) {
          const crashed = yield* Deferred.make<void>()
          const hooks: Relay.HooksShape = {
            at: (point, owner) =>
              Effect.gen(function* () {
                const open = publishing.get(owner) ?? 0
                if (point === "afterClaim") {
                  if (open > 0) overlaps++
                  publishing.set(owner, open + 1)
                } else if (point === "afterPublish") publishing.set(owner, open - 1)
                if (!(yield* Ref.get(chaos)) || point !== crashPoint) return
                if (yield* chance(pCrash)) {
                  crashes++
                  yield* Deferred.succeed(crashed, undefined)
                  return yield* Effect.never // frozen until killed: nothing after this point runs
                }
                if (yield* chance(pStall)) {
                  stalls++
                  yield* Effect.sleep(Duration.millis(lease * 2)) // a hung relay whose lease expires
                }
              })
          }
          const owner = `relay-${slot}-${generation}`
          const fiber = yield* Effect.forkChild(
            relayLoop(owner, settings).pipe(
              Effect.provideService(Relay.Hooks, hooks),
              Effect.updateService(Publisher, (publisher) =>
                publishLatency === 0
                  ? publisher
                  : { publish: (requests) => Effect.andThen(Effect.sleep(publishLatency), publisher.publish(requests)) }
              )
            )
          )
          yield* Deferred.await(crashed)
          yield* Fiber.interrupt(fiber) // the crash: no finalizer hands anything back
          yield* Effect.sleep(Duration.millis(yield* int(10, 300))) // restart delay
        }
      })
    yield* Effect.forEach(
      Array.from({ length: relays }, (_, i) => i),
      (slot) => Effect.forkScoped(Effect.provide(relaySlot(slot), world.layer))
    )

    // ---- a consumer that may run ahead of the relay's acknowledgement (R2.5, R2.6) -------------
    // It reads the broker log partition by partition and records processing through the
    // transition helper; a row the store still shows PENDING (a lost ack) is skipped for that copy.
    let processedRows = 0
    if (consumerAhead) {
      const seen = new Set<string>()
      const consumer = Effect.gen(function* () {
        for (;;) {
          yield* Effect.sleep(Duration.millis(yield* int(20, 150)))
          const records = yield* broker.records("orders")
          const stuck = new Set<number>()
          for (const record of records) {
            const at = `${record.partition}/${record.offset}`
            if (seen.has(at) || stuck.has(record.partition)) continue
            const id = record.headers["event-id"] as EventId
            const done = yield* Effect.gen(function* () {
              const started = yield* Transition.startProcessing(id)
              if (started.outcome === "applied" || started.current === "UNDER_PROCESSING") {
                const result = (yield* chance(0.9)) ? ("SUCCESS" as const) : ("PUSHED_FAILURE" as const)
                const finished = yield* Transition.finishProcessing(id, result, { reason: "handler gave up" })
                if (finished.outcome === "applied") processedRows++
              }
            }).pipe(
              Effect.as(true),
              Effect.catch(() => Effect.succeed(false))
            )
            // A store error stops this partition until the next poll, like an uncommitted offset.
            if (done) seen.add(at)
            else stuck.add(record.partition)
          }
        }
      })
      yield* Effect.forkScoped(Effect.provide(consumer, world.layer))
    }

    // ---- stale recovery, which may crash after probing -----------------------------------------
    let recoveryCrashes = 0
    const recoverySlot = Effect.gen(function* () {
      for (;;) {
        const crashed = yield* Deferred.make<void>()
        const hooks: StaleRecovery.HooksShape = {
          afterProbe: () =>
            Effect.gen(function* () {
              // A budget instead of the chaos flag: recovery mostly runs after the busy phase.
              if (recoveryCrashes < 2 && (yield* chance(pRecoveryCrash))) {
                recoveryCrashes++
                yield* Deferred.succeed(crashed, undefined)
                return yield* Effect.never
              }
            })
        }
        const fiber = yield* Effect.forkChild(
          StaleRecovery.run({ interval: Duration.millis(250), batchSize: 10, unknownPartition }).pipe(
            Effect.provideService(StaleRecovery.Hooks, hooks)
          )
        )
        yield* Deferred.await(crashed)
        yield* Fiber.interrupt(fiber)
        yield* Effect.sleep(Duration.millis(100))
      }
    })
    if (staleRecovery) yield* Effect.forkScoped(Effect.provide(recoverySlot, world.layer))

    // ---- production faults, on the TestClock -----------------------------------------------------
    const faultsFiber =
      plan === undefined
        ? undefined
        : yield* Effect.forkScoped(
            Effect.forEach(
              plan.steps,
              (step) =>
                Effect.andThen(
                  Effect.sleep(Duration.millis(step.after)),
                  step._tag === "db"
                    ? step.mode === "up"
                      ? db.recover
                      : db.outage({ mode: step.mode, lostCommitAcks: step.lostCommitAcks })
                    : step._tag === "broker"
                      ? step.mode === "up"
                        ? broker.endOutage
                        : broker.outage({ mode: step.mode, timeout: "300 millis" })
                      : broker.createTopic("orders", partitions + step.by)
                ),
              { discard: true }
            )
          )

    // ---- drive time ----------------------------------------------------------------------------
    while (enqueuersDone < enqueuing.length) {
      yield* TestClock.adjust(Duration.millis(50))
    }
    if (faultsFiber !== undefined) {
      // The remaining faults play out (every outage ends) before the quiet phase.
      while ((yield* Fiber.await(faultsFiber).pipe(Effect.timeoutOption(0)))._tag === "None") {
        yield* TestClock.adjust(Duration.millis(50))
      }
      yield* db.recover
      yield* broker.endOutage
    }
    // Quiet phase: faults and crashes off; everything committed must settle.
    yield* Ref.set(chaos, false)
    yield* db.clearFaults
    yield* broker.clearFaults
    yield* broker.setPublishHook(undefined)
    // Settled: nothing left to publish, except rows waiting for good behind a FAILURE of their
    // key (failedHead "block": only an operator moves them), which need not be waited for.
    const settled = Effect.map(db.rows, (rows) => {
      const failedSince = new Map<string, number>()
      for (const row of rows) {
        if (row.status === "FAILURE" && row.key !== null)
          failedSince.set(row.key, Math.min(row.seq, failedSince.get(row.key) ?? row.seq))
      }
      return rows.every((row) =>
        row.status === "DISPATCHING"
          ? false
          : row.status !== "PENDING" || (row.key !== null && (failedSince.get(row.key) ?? Infinity) < row.seq)
      )
    })
    for (let waited = 0; waited < (staleRecovery ? 120_000 : 10_000) && !(yield* settled); waited += 100) {
      yield* TestClock.adjust(Duration.millis(100))
    }
    // A relay stalled past its lease may still publish its stale batch: let it wake up and act
    // before judging (its duplicates and late marks are part of the run).
    for (let waited = 0; waited < lease * 2 + 500; waited += 100) {
      yield* TestClock.adjust(Duration.millis(100))
    }

    // ---- judge ---------------------------------------------------------------------------------
    const rows = yield* db.rows
    const history = yield* db.history
    const log = yield* broker.records("orders")
    const violations = OutboxInvariants.check({ transactions, rows, history, log })
    // Production faults: a record's attempts are spent only by faults of the record itself, so a
    // FAILURE row must have met one (an injected publish fault, or a partition that did not exist).
    const findings =
      plan === undefined
        ? []
        : rows
            .filter(
              (row) =>
                row.status === "FAILURE" &&
                !faulted.has(row.id) &&
                !(row.partition !== null && row.partition >= partitions) &&
                !(oversize !== undefined && tooLargeAlone(row, oversize.maxMessageBytes))
            )
            .map(
              (row) => `FAILURE of event ${row.id} (key ${row.key}) that no fault of its own explains: ${row.lastError}`
            )
    const statuses = Lifecycle.statuses
      .map((s) => `${s}=${rows.filter((r) => r.status === s).length}`)
      .filter((s) => !s.endsWith("=0"))
    const summary =
      `seed ${seed}: ${transactions.length} tx, ${rows.length} rows (${statuses.join(" ")}), ` +
      `${log.length} records, ${relays} relays (depth ${pipelineDepth}, publish ${publishLatency} ms, ${overlaps} overlapping claims), crash ${crashPoint}: ${crashes} crashes, ${stalls} stalls, ` +
      `${recoveryCrashes} recovery crashes, ${lostAcks} lost db acks, ${consumerAhead ? `consumer processed ${processedRows}, ` : ""}partitions ${partitions}${explicitPartitions ? " explicit" : ""}` +
      `${missingPartitionKey ? ` missing(${unknownPartition})` : ""}` +
      (plan === undefined ? "" : `; production faults: ${plan.describe}`) +
      (oversize === undefined ? "" : `; ${oversize.describe}`) +
      (options.wrongBroker === undefined ? "" : `; wrong broker: ${options.wrongBroker}`)
    const fingerprint = JSON.stringify({
      transactions,
      // The tracer's span ids come from its own generator, not the seeded Random: leave them out.
      rows: rows.map(({ headers: { traceparent: _t, ...headers }, payload: _, ...row }) => ({ ...row, headers })),
      history,
      log: log.map((r) => [r.partition, r.offset, r.headers["event-id"], r.timestamp])
    })
    const inserted = new Set(history.filter((c) => c.from === null).map((c) => c.id))
    const ids = log.map((r) => r.headers["event-id"])
    const stats = {
      crashPoint,
      crashes,
      stalls,
      recoveryCrashes,
      rolledBack: transactions.filter((tx) => !tx.ids.some((id) => inserted.has(id))).length,
      failures: rows.filter((r) => r.status === "FAILURE").length,
      duplicates: ids.length - new Set(ids).size,
      lostAcks,
      processed: processedRows,
      overlaps
    }
    return { seed, violations, findings, summary, fingerprint, stats }
  })

// ---- production faults ---------------------------------------------------------------

/** A record the broker refuses even alone: its FAILURE is its own fault. */
const tooLargeAlone = (row: OutboxMessage, maxMessageBytes: number) =>
  RecordSize.singleRecordBatchBytes({ key: row.key, headers: row.headers, payload: row.payload }) > maxMessageBytes

type RelayFaultStep =
  | { readonly _tag: "db"; readonly mode: InMemoryDatabase.OutageMode | "up"; readonly lostCommitAcks: number }
  | { readonly _tag: "broker"; readonly mode: InMemoryBroker.OutageMode | "up" }
  | { readonly _tag: "grow"; readonly by: number }

/**
 * The production faults of one seed, in time order (`after`: millis after the previous step). A
 * broker outage lasts up to 6 s: far longer than the relay's retry budget here (3 to 6 attempts,
 * backoff 20 to 200 ms).
 */
const relayFaultPlan = (rand: () => number) => {
  const between = (min: number, max: number) => min + Math.floor(rand() * (max - min + 1))
  const timeline: Array<{ readonly at: number; readonly step: RelayFaultStep }> = []
  const described: Array<string> = []
  if (rand() < 0.4) {
    const modes: ReadonlyArray<InMemoryBroker.OutageMode> = ["refuse", "timeout", "freeze"]
    const mode = modes[between(0, 2)]!
    const at = between(50, 800)
    const duration = between(500, 6_000)
    timeline.push({ at, step: { _tag: "broker", mode } }, { at: at + duration, step: { _tag: "broker", mode: "up" } })
    described.push(`broker ${mode} at ${at} ms for ${duration} ms`)
  }
  if (rand() < 0.4) {
    const at = between(50, 800)
    const shutdown = between(20, 150)
    const down = between(200, 2_500)
    const startup = between(50, 400)
    const lostCommitAcks = between(0, 1)
    timeline.push(
      { at, step: { _tag: "db", mode: "shutdown", lostCommitAcks } },
      { at: at + shutdown, step: { _tag: "db", mode: "down", lostCommitAcks: 0 } },
      { at: at + shutdown + down, step: { _tag: "db", mode: "startup", lostCommitAcks: 0 } },
      { at: at + shutdown + down + startup, step: { _tag: "db", mode: "up", lostCommitAcks: 0 } }
    )
    described.push(`database out at ${at} ms for ${shutdown + down + startup} ms (${lostCommitAcks} lost commit acks)`)
  }
  if (rand() < 0.3) {
    const at = between(50, 800)
    const by = between(1, 2)
    timeline.push({ at, step: { _tag: "grow", by } })
    described.push(`grow +${by} at ${at} ms`)
  }
  timeline.sort((a, b) => a.at - b.at)
  let previous = 0
  const steps = timeline.map(({ at, step }) => {
    const after = at - previous
    previous = at
    return { ...step, after }
  })
  return { steps, describe: described.length === 0 ? "none drawn" : described.join(", ") }
}
