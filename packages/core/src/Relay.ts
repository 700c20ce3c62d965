/**
 * The dispatcher (R1.3–R1.6): wake-up signal or poll interval → claim a batch under a lease →
 * publish the whole batch in one `Publisher.publish` call → record the receipts in one batched
 * compare-and-set → retry with backoff, or `FAILURE` with a reason.
 *
 * Per-key order (R1.4) rests on three rules, explained in `docs/ordering.md`:
 *
 * 1. The store claims, per key, only a contiguous prefix of its `PENDING` rows, and nothing of a
 *    key while any of its rows is `DISPATCHING` (the "key lock"). Two relays never hold rows of
 *    one key at the same time.
 * 2. Within a batch, the rows of one key are sent only while they go to the same destination
 *    (topic, partition) as the key's first row; the rest are handed back unsent. One destination
 *    means one partition batch, which the broker appends all-or-nothing and in order.
 * 3. Once a row of a key fails, the later rows of that key in the batch are handed back to
 *    `PENDING` (no attempt counted) instead of being marked published or failed on their own:
 *    a key's published rows always form a prefix of its creation order, and the held-back rows
 *    follow the failed one when it is retried. A row given up (`FAILURE`) keeps blocking its
 *    key by default (`failedHead: "block"`) until an operator requeues or skips it.
 *
 * Outages (issue #12, H1): a `BrokerUnavailableError` (or this relay's own publish timeout) says
 * nothing about the record, so it never counts an attempt. The rows go back to `PENDING` after an
 * outage backoff (`outageBackoff`, jittered, growing with each outage in a row) and the loop
 * claims nothing until then. Only errors about the record count towards `maxAttempts`, and
 * before any row goes to `FAILURE` the broker is probed (`BrokerProbe`, when provided): a record
 * that landed ends `PUBLISHED`.
 *
 * Pipelining: the loop ({@link Relay.run}) keeps up to `pipelineDepth` batches in flight. It
 * claims batch N+1 while batch N is published, and batch N is marked while N+1 is on the wire.
 * This needs no rule of its own: by rule 1 a claim takes nothing of a key that has a
 * `DISPATCHING` row, and a batch's rows stay `DISPATCHING` until its mark commits, so two
 * batches in flight never share a key — for the store, the relay's own batches are exactly like
 * batches of two relays. Rows without a key are unordered anyway. Each batch has a lease owner
 * of its own (`<owner>#<n>`): a batch that outlives its lease (stale recovery requeued its rows
 * and a later batch of this relay claimed them again) cannot fail or hand back rows it no longer
 * holds, exactly as a stale relay could not.
 *
 * A relay interrupted mid-batch (a crash) leaves the rows of every batch in flight `DISPATCHING`
 * under its expiring lease; `StaleRecovery` finds them. A relay shut down gracefully
 * ({@link start}'s scope closing) stops claiming and finishes its batches in flight, or hands all
 * their rows back if that takes too long.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import { BrokerProbe } from "./BrokerProbe.ts"
import { BrokerUnavailableError, type OutboxStoreError, type PublishError, RetriablePublishError } from "./Errors.ts"
import type { EventId, OutboxMessage } from "./OutboxMessage.ts"
import type { FailedHeadPolicy, OutboxStore } from "./OutboxStore.ts"
import * as PartitionLimit from "./PartitionLimit.ts"
import { Publisher, type PublishOutcome, type PublishRequest } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"
import { WakeUp } from "./WakeUp.ts"

/**
 * What to do when a record targets a partition the broker does not have (R3.3).
 *
 * - `"fail"`: `FAILURE` with a reason naming the topic, partition and partition count.
 * - `"sync"`: ask `BrokerAdmin` for the partition count, grow the topic to include the
 *   partition when it is missing (the database assignment says it should exist, R6.2), then
 *   requeue with an attempt counted.
 *
 * @since 0.1.0
 * @category models
 */
export type UnknownPartitionPolicy = "fail" | "sync"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /**
   * The relay's id; unique per relay instance. Default: `relay-` + random hex. Each batch is
   * leased to `<owner>#<n>` (n counts this relay's claims), so a batch's writes apply only to
   * its own claim.
   */
  readonly owner?: string
  /** Rows claimed per batch. */
  readonly batchSize: number
  /** Rows of one key per batch (its contiguous prefix is cut here). */
  readonly maxPerKey: number
  /** How long a claim is leased. Must exceed `publishTimeout` comfortably. */
  readonly lease: Duration.Duration
  /** A publish call taking longer is abandoned as a retriable failure. */
  readonly publishTimeout: Duration.Duration
  /** Idle relays look for work this often even without a wake-up signal. */
  readonly pollInterval: Duration.Duration
  /** Attempts (publish calls) before a retriable failure becomes `FAILURE`. */
  readonly maxAttempts: number
  /** Delay before the n-th retry: the schedule's n-th delay. A finished schedule means give up. */
  readonly backoff: Schedule.Schedule<unknown>
  /**
   * Delay after the n-th failed publish in a row that found the broker unavailable (connection
   * refused, no leader, request or publish timeout): the schedule's n-th delay (its last one once
   * it finishes). No attempt is counted and the relay claims nothing until it has passed.
   */
  readonly outageBackoff: Schedule.Schedule<unknown>
  /**
   * What a `FAILURE` row means for the younger rows of its key. `"block"` (default): they wait
   * until an operator requeues or skips it, so the key's order holds. `"skip"`: they go on
   * without it (the behaviour before issue #12).
   */
  readonly failedHead: FailedHeadPolicy
  readonly unknownPartition: UnknownPartitionPolicy
  /** `"sync"` never grows a topic past this partition (`OUTBOX_MAX_PARTITION`, default 1023, M4). */
  readonly maxPartition?: number
  /** Graceful shutdown waits this long for the batches in flight before handing them back. */
  readonly shutdownTimeout: Duration.Duration
  /**
   * Batches one relay holds at once (claimed, not yet marked): the loop claims the next batch
   * while earlier ones are published and marked. 1 = one batch at a time, claim → publish → mark.
   */
  readonly pipelineDepth: number
}

/**
 * Exponential backoff from `base` with jitter, each delay capped at `max`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const backoff = (base: Duration.Input, max: Duration.Input, factor = 2): Schedule.Schedule<unknown> => {
  const cap = Duration.toMillis(max)
  return Schedule.exponential(base, factor).pipe(
    Schedule.jittered,
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.millis(Math.min(Duration.toMillis(duration), cap))))
  )
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  batchSize: 100,
  maxPerKey: 100,
  lease: Duration.seconds(30),
  publishTimeout: Duration.seconds(10),
  pollInterval: Duration.seconds(1),
  maxAttempts: 10,
  backoff: backoff("500 millis", "1 minute"),
  outageBackoff: backoff("500 millis", "10 seconds"),
  failedHead: "block",
  unknownPartition: "fail",
  shutdownTimeout: Duration.seconds(10),
  pipelineDepth: 2
}

/**
 * Settings from the environment (`OUTBOX_RELAY_*`), defaulting to {@link defaults}.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  owner: Config.option(Config.String("OUTBOX_RELAY_OWNER")),
  batchSize: Config.Int("OUTBOX_RELAY_BATCH_SIZE").pipe(Config.withDefault(defaults.batchSize)),
  maxPerKey: Config.option(Config.Int("OUTBOX_RELAY_MAX_PER_KEY")),
  lease: Config.Duration("OUTBOX_RELAY_LEASE").pipe(Config.withDefault(defaults.lease)),
  publishTimeout: Config.Duration("OUTBOX_RELAY_PUBLISH_TIMEOUT").pipe(Config.withDefault(defaults.publishTimeout)),
  pollInterval: Config.Duration("OUTBOX_RELAY_POLL_INTERVAL").pipe(Config.withDefault(defaults.pollInterval)),
  maxAttempts: Config.Int("OUTBOX_RELAY_MAX_ATTEMPTS").pipe(Config.withDefault(defaults.maxAttempts)),
  backoffBase: Config.Duration("OUTBOX_RELAY_BACKOFF_BASE").pipe(Config.withDefault(Duration.millis(500))),
  backoffMax: Config.Duration("OUTBOX_RELAY_BACKOFF_MAX").pipe(Config.withDefault(Duration.minutes(1))),
  outageBackoffBase: Config.Duration("OUTBOX_RELAY_OUTAGE_BACKOFF_BASE").pipe(Config.withDefault(Duration.millis(500))),
  outageBackoffMax: Config.Duration("OUTBOX_RELAY_OUTAGE_BACKOFF_MAX").pipe(Config.withDefault(Duration.seconds(10))),
  failedHead: Config.Literals(["block", "skip"], "OUTBOX_RELAY_FAILED_HEAD").pipe(
    Config.withDefault<FailedHeadPolicy>("block")
  ),
  unknownPartition: Config.Literals(["fail", "sync"], "OUTBOX_RELAY_UNKNOWN_PARTITION").pipe(
    Config.withDefault<UnknownPartitionPolicy>("fail")
  ),
  maxPartition: PartitionLimit.config,
  shutdownTimeout: Config.Duration("OUTBOX_RELAY_SHUTDOWN_TIMEOUT").pipe(Config.withDefault(defaults.shutdownTimeout)),
  pipelineDepth: Config.Int("OUTBOX_RELAY_PIPELINE_DEPTH").pipe(Config.withDefault(defaults.pipelineDepth))
}).pipe(
  Config.map(
    ({ backoffBase, backoffMax, maxPerKey, outageBackoffBase, outageBackoffMax, owner, ...rest }): Settings => ({
      ...rest,
      ...(Option.isSome(owner) ? { owner: owner.value } : {}),
      maxPerKey: Option.getOrElse(maxPerKey, () => rest.batchSize),
      backoff: backoff(backoffBase, backoffMax),
      outageBackoff: backoff(outageBackoffBase, outageBackoffMax)
    })
  )
)

/**
 * Named points of a batch, for crash-testing: a simulation installs hooks that interrupt the
 * relay fiber there. Production code leaves the defaults (do nothing).
 *
 * @since 0.1.0
 * @category testing
 */
export type CrashPoint = "afterClaim" | "afterPublish" | "afterMark"

/**
 * @since 0.1.0
 * @category testing
 */
export interface HooksShape {
  readonly at: (point: CrashPoint, owner: string, rows: ReadonlyArray<OutboxMessage>) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category testing
 */
export const Hooks = Context.Reference<HooksShape>("@effect-outbox/core/Relay/Hooks", {
  defaultValue: () => ({ at: () => Effect.void })
})

/**
 * What one batch did.
 *
 * @since 0.1.0
 * @category models
 */
export interface BatchResult {
  readonly claimed: number
  readonly published: number
  readonly retried: number
  readonly failed: number
  /** Handed back unsent or behind a failed row of their key. */
  readonly heldBack: number
}

const emptyResult: BatchResult = { claimed: 0, published: 0, retried: 0, failed: 0, heldBack: 0 }

/**
 * The delay in millis before retry number `attempt` (1-based), or `None` when the schedule has
 * no more recurrences.
 *
 * @since 0.1.0
 * @category backoff
 */
export const retryDelay = (
  schedule: Schedule.Schedule<unknown>,
  attempt: number
): Effect.Effect<Option.Option<number>> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    let delay = 0
    for (let i = 0; i < attempt; i++) {
      const [, duration] = yield* step(0, undefined)
      delay = Duration.toMillis(duration)
    }
    return delay
  }).pipe(
    Effect.exit,
    Effect.map((exit) => (Exit.isSuccess(exit) ? Option.some(exit.value) : Option.none()))
  )

/**
 * The delay in millis after the `n`-th outage in a row (1-based): the schedule's n-th delay, or
 * its last one when it finished earlier (an outage is never given up on).
 *
 * @since 0.2.0
 * @category backoff
 */
export const outageDelay = (schedule: Schedule.Schedule<unknown>, n: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const step = yield* Schedule.toStep(schedule)
    let delay = 0
    for (let i = 0; i < n; i++) {
      const next = yield* Effect.exit(step(0, undefined))
      if (Exit.isFailure(next)) break
      delay = Duration.toMillis(next.value[1])
    }
    return Math.max(0, Math.round(delay))
  })

const isUnavailable = (outcome: PublishOutcome): boolean =>
  Result.isFailure(outcome) && outcome.failure._tag === "BrokerUnavailableError"

type Requirements = OutboxStore | Publisher

// Whether some key has `maxPerKey` rows in the batch (its prefix may go on in PENDING).
const cutAtMaxPerKey = (rows: ReadonlyArray<OutboxMessage>, maxPerKey: number): boolean => {
  const perKey = new Map<string, number>()
  for (const row of rows) {
    if (row.key === null) continue
    const n = (perKey.get(row.key) ?? 0) + 1
    if (n >= maxPerKey) return true
    perKey.set(row.key, n)
  }
  return false
}

const destination = (row: OutboxMessage) => `${row.topic}\u0000${row.partition ?? "*"}`

const describe = (error: PublishError): string => {
  switch (error._tag) {
    case "RetriablePublishError":
    case "BrokerUnavailableError":
    case "PermanentPublishError":
      return `${error._tag}: ${error.reason}`
    case "UnknownPartitionError":
      return `UnknownPartitionError: ${error.message}`
  }
}

// 48 random bits: two relays sharing an owner id would share leases.
const makeOwner = Effect.map(
  Effect.all([Random.nextIntBetween(0, 0xffffff), Random.nextIntBetween(0, 0xffffff)]),
  ([a, b]) => `relay-${a.toString(16).padStart(6, "0")}${b.toString(16).padStart(6, "0")}`
)

/**
 * A relay instance: one owner id, its batch step and its loop.
 *
 * @since 0.1.0
 * @category models
 */
export interface Relay {
  readonly owner: string
  /** Claims and handles one batch (claim → publish → mark), on its own: no pipelining. */
  readonly runOnce: Effect.Effect<BatchResult, OutboxStoreError, Requirements>
  /**
   * Loops until stopped (see {@link start}) with up to `pipelineDepth` batches in flight: it
   * claims a batch, hands it to a fiber of its own for publish and mark, and claims the next one
   * as soon as a slot is free — at once when the claim came back full, otherwise after a wake-up
   * or the poll interval. Store errors are logged and retried at the next poll. Interrupting it
   * is a crash: the rows of every batch in flight keep their lease until `StaleRecovery` takes
   * them back.
   */
  readonly run: Effect.Effect<void, never, Requirements>
  /** Rows this relay holds right now (claimed, not yet settled), over all its batches in flight. */
  readonly inFlight: Effect.Effect<ReadonlyArray<OutboxMessage>>
  /** Hands back rows it still holds to `PENDING` (used after an abandoned graceful shutdown). */
  readonly releaseInFlight: Effect.Effect<void, OutboxStoreError, OutboxStore>
}

/**
 * Builds a relay. The default owner id comes from `Random`, so a seeded run replays it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Partial<Settings> = {}): Effect.Effect<Relay> =>
  Effect.gen(function* () {
    const s: Settings = { ...defaults, ...settings }
    if (
      !(s.batchSize >= 1 && s.maxPerKey >= 1 && s.maxAttempts >= 1) ||
      !(Number.isInteger(s.pipelineDepth) && s.pipelineDepth >= 1)
    ) {
      return yield* Effect.die(
        new Error(
          `relay settings need batchSize, maxPerKey, maxAttempts and pipelineDepth (an integer) >= 1 (got ${s.batchSize}, ${s.maxPerKey}, ${s.maxAttempts}, ${s.pipelineDepth})`
        )
      )
    }
    if (Duration.toMillis(s.publishTimeout) >= Duration.toMillis(s.lease)) {
      // A publish still running when its lease expires races stale recovery: legal (the
      // writes are conditional), but it means duplicates. Say so instead of failing.
      yield* Effect.logWarning(
        `outbox relay: publishTimeout (${Duration.format(s.publishTimeout)}) should be well below the lease (${Duration.format(s.lease)})`
      )
    }
    const owner = s.owner ?? (yield* makeOwner)
    // The batches in flight, each as claimed. A batch leaves when it is settled or its step
    // fails (its rows then wait for stale recovery); an interrupted one stays, for
    // `releaseInFlight`.
    const inFlight = yield* Ref.make<ReadonlyArray<Claimed>>([])
    const stopped = yield* Deferred.make<void>()
    // Claims started so far; a batch compares it at its end to learn whether a claim ran while
    // it held its keys.
    let claims = 0
    // Publishes in a row that found the broker unavailable, and the time before which the loop
    // claims nothing (the outage backoff): an outage churns no rows.
    let outages = 0
    let pausedUntil = 0

    const claimBatch = Effect.suspend(() => {
      const serial = ++claims
      const lease = `${owner}#${serial}`
      return Transition.claim({
        owner: lease,
        limit: s.batchSize,
        maxPerKey: s.maxPerKey,
        leaseMillis: Duration.toMillis(s.lease),
        failedHead: s.failedHead
      }).pipe(
        Effect.map((rows): Claimed => ({ rows, lease, serial })),
        Effect.tap((claimed) =>
          claimed.rows.length === 0 ? Effect.void : Ref.update(inFlight, (all) => [...all, claimed])
        )
      )
    })

    // One batch: claim, publish, mark. In the pipelined loop, `pipeline` hears the claim's size
    // (or failure) as soon as it is known, so the loop can claim again while this batch goes on.
    const batch = (pipeline?: Pipeline): Effect.Effect<BatchResult, OutboxStoreError, Requirements> =>
      Effect.gen(function* () {
        const hooks = yield* Hooks
        // Claiming and remembering the rows happen together, so an abandoned shutdown knows
        // exactly what to hand back.
        const claimed = yield* Effect.uninterruptible(
          pipeline === undefined
            ? claimBatch
            : claimBatch.pipe(
                Effect.tap(({ rows }) => Deferred.succeed(pipeline.claimed, rows.length)),
                Effect.tapError((error) => Deferred.fail(pipeline.claimed, error))
              )
        )
        const { lease, rows, serial } = claimed
        if (rows.length === 0) return emptyResult
        const result = yield* Effect.andThen(hooks.at("afterClaim", owner, rows), dispatch(rows, lease, hooks)).pipe(
          Effect.onExit((exit) =>
            Exit.hasInterrupts(exit) ? Effect.void : Ref.update(inFlight, (all) => all.filter((b) => b !== claimed))
          )
        )
        // Rows of this batch's keys may wait behind it: a claim that ran while it was in flight
        // skipped its keys (rule 1), or a key was cut at `maxPerKey`. The keys are free now: ask
        // the loop for another claim instead of leaving those rows to the poll interval.
        const keyed = rows.some((row) => row.key !== null)
        if (pipeline !== undefined && ((keyed && claims > serial) || cutAtMaxPerKey(rows, s.maxPerKey))) {
          yield* pipeline.wake
        }
        return result
      }).pipe(Effect.withSpan(Telemetry.spans.relayBatch, { attributes: { "outbox.owner": owner } }))

    const runOnce: Effect.Effect<BatchResult, OutboxStoreError, Requirements> = batch()

    const dispatch = (rows: ReadonlyArray<OutboxMessage>, lease: string, hooks: HooksShape) =>
      Effect.gen(function* () {
        // Rule 2: per key, send only while the destination stays that of the key's first row.
        const firstDestination = new Map<string, string>()
        const send: Array<OutboxMessage> = []
        const notSent: Array<OutboxMessage> = []
        const cut = new Set<string>()
        for (const row of rows) {
          if (row.key !== null) {
            const first = firstDestination.get(row.key)
            if (first === undefined) firstDestination.set(row.key, destination(row))
            else if (cut.has(row.key) || first !== destination(row)) {
              cut.add(row.key)
              notSent.push(row)
              continue
            }
          }
          send.push(row)
        }

        const outcomes = yield* publish(send)
        yield* hooks.at("afterPublish", owner, rows)

        const now = yield* Clock.currentTimeMillis
        const outageRetryAt = yield* noteOutage(outcomes, now)

        // Rule 3: walk in seq order; after a key's first failure, hold its later rows back.
        const failedKey = new Map<string, EventId>()
        const published: Array<Transition.Published> = []
        const failures: Array<Transition.PublishFailure> = []
        const giveUp: Array<GiveUp> = []
        const heldBack: Array<Transition.Released> = notSent.map((row) => ({
          id: row.id,
          owner: lease,
          reason: "held back: an earlier row of its key goes to another destination"
        }))
        let retried = 0
        let failed = 0
        for (let i = 0; i < send.length; i++) {
          const row = send[i]!
          const outcome = outcomes[i]!
          const blocker = row.key === null ? undefined : failedKey.get(row.key)
          if (blocker !== undefined) {
            heldBack.push({
              id: row.id,
              owner: lease,
              reason: `held back behind failed row ${blocker} of key ${row.key}`
            })
            continue
          }
          if (Result.isSuccess(outcome)) {
            published.push({ id: row.id, receipt: outcome.success })
            continue
          }
          if (row.key !== null) failedKey.set(row.key, row.id)
          const failure = yield* classify(row, outcome.failure, now, lease, outageRetryAt)
          if (failure.retryAt === null) {
            giveUp.push({ row, failure, retriable: outcome.failure._tag === "RetriablePublishError" })
          } else {
            failures.push(failure)
            retried++
          }
        }
        // Before FAILURE, ask the broker: a record that landed (a timeout, a lost acknowledgement)
        // is PUBLISHED, not FAILURE.
        const verdicts = yield* probeBeforeFailure(giveUp)
        // A retriable failure is given up only when the broker can be asked and says the record
        // is absent: a probe that fails means the broker is unreachable, which is an outage.
        const waitUntil = verdicts.some((v) => v._tag === "unreachable")
          ? outageRetryAt > now
            ? outageRetryAt
            : yield* enterOutage(now, "probing before FAILURE failed")
          : now
        for (const verdict of verdicts) {
          if (verdict._tag === "found") published.push(verdict.published)
          else if (verdict._tag === "unreachable") {
            failures.push({ ...verdict.failure, retryAt: waitUntil })
            retried++
          } else {
            failures.push(verdict.failure)
            failed++
          }
        }

        // One batched store call for the whole batch's outcome.
        yield* Transition.settle({ published, failed: failures, released: heldBack })
        yield* hooks.at("afterMark", owner, rows)

        yield* Metric.update(Telemetry.published, published.length)
        const unavailable = send.filter((_, i) => isUnavailable(outcomes[i]!)).length
        if (unavailable > 0)
          yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "unavailable" }), unavailable)
        if (retried - unavailable > 0)
          yield* Metric.update(
            Metric.withAttributes(Telemetry.publishFailed, { kind: "retriable" }),
            retried - unavailable
          )
        if (failed > 0)
          yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "permanent" }), failed)
        if (heldBack.length > 0) {
          yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "ordering" }), heldBack.length)
        }
        return { claimed: rows.length, published: published.length, retried, failed, heldBack: heldBack.length }
      })

    const publish = (rows: ReadonlyArray<OutboxMessage>) =>
      Effect.gen(function* () {
        if (rows.length === 0) return []
        const publisher = yield* Publisher
        const requests = rows.map(
          (row): PublishRequest => ({
            id: row.id,
            topic: row.topic,
            key: row.key,
            partition: row.partition,
            headers: row.headers,
            payload: row.payload
          })
        )
        const start = yield* Clock.currentTimeMillis
        const answer = yield* publisher.publish(requests).pipe(Effect.timeoutOption(s.publishTimeout))
        const end = yield* Clock.currentTimeMillis
        yield* Metric.update(Telemetry.publishLatency, end - start)
        return rows.map((row, i): PublishOutcome => {
          if (Option.isNone(answer)) {
            // No answer says nothing about the record: the broker is unreachable or frozen.
            return Result.fail(
              new BrokerUnavailableError({
                topic: row.topic,
                reason: `publish timed out after ${Duration.format(s.publishTimeout)} (the record may have landed)`
              })
            )
          }
          return (
            answer.value[i] ??
            Result.fail(
              new RetriablePublishError({
                topic: row.topic,
                reason: "the publisher returned no outcome for this record"
              })
            )
          )
        })
      }).pipe(Effect.withSpan(Telemetry.spans.publish, { attributes: { "outbox.batch_size": rows.length } }))

    // An outage (any outcome saying the broker is unavailable) pauses claiming for the outage
    // backoff; a publish that got through ends the outage. Returns when the rows may retry.
    const noteOutage = (outcomes: ReadonlyArray<PublishOutcome>, now: number) =>
      Effect.gen(function* () {
        const first = outcomes.find(isUnavailable)
        if (first === undefined) {
          if (outages > 0 && outcomes.some(Result.isSuccess)) {
            yield* Effect.logInfo(`outbox relay ${owner}: the broker answers again after ${outages} failed publishes`)
            outages = 0
          }
          return now
        }
        return yield* enterOutage(now, Result.isFailure(first) ? describe(first.failure) : "")
      })

    const enterOutage = (now: number, reason: string) =>
      Effect.gen(function* () {
        outages++
        const delay = yield* outageDelay(s.outageBackoff, outages)
        pausedUntil = Math.max(pausedUntil, now + delay)
        yield* Effect.logWarning(
          `outbox relay ${owner}: broker unavailable (${outages} in a row), no attempt counted; claiming again in ${delay} ms: ${reason}`
        )
        return now + delay
      })

    // Rows about to go to FAILURE: probe the broker for each. Found: PUBLISHED with its receipt.
    // A probe error on a retriable failure: "unreachable" (retried as an outage). Absent, a probe
    // error on a permanent one, or no BrokerProbe: FAILURE (the reason says when it is not proven
    // absent), with a warning per row.
    const probeBeforeFailure = (candidates: ReadonlyArray<GiveUp>) =>
      Effect.gen(function* () {
        if (candidates.length === 0) return []
        const probe = yield* Effect.serviceOption(BrokerProbe)
        return yield* Effect.forEach(
          candidates,
          ({ failure, retriable, row }) =>
            Effect.gen(function* () {
              let note = "; not probed (no BrokerProbe): the record may be on the broker"
              if (Option.isSome(probe)) {
                const found = yield* probe.value
                  .find({ topic: row.topic, partition: row.partition, eventId: row.id, since: row.createdAt })
                  .pipe(Effect.result)
                if (Result.isSuccess(found) && Option.isSome(found.success)) {
                  yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "landed" }), 1)
                  yield* Effect.logWarning(
                    `outbox relay ${owner}: event ${row.id} was about to go to FAILURE but is on the broker: PUBLISHED (${failure.reason})`
                  )
                  return {
                    _tag: "found" as const,
                    published: { id: row.id, receipt: found.success.value } satisfies Transition.Published
                  }
                }
                if (Result.isFailure(found) && retriable) {
                  return {
                    _tag: "unreachable" as const,
                    failure: {
                      ...failure,
                      reason: `${failure.reason}; probe before FAILURE failed: ${found.failure.message}`
                    }
                  }
                }
                note = Result.isSuccess(found)
                  ? ""
                  : `; probe before FAILURE failed (${found.failure.message}): the record may be on the broker`
              }
              const given = { ...failure, reason: failure.reason + note }
              yield* Effect.logWarning(
                `outbox relay ${owner}: event ${row.id} (topic ${row.topic}, key ${row.key ?? "none"}) -> FAILURE: ${given.reason}`
              ).pipe(Effect.annotateLogs({ eventId: row.id, topic: row.topic }))
              return { _tag: "failure" as const, failure: given }
            }),
          { concurrency: 8 }
        )
      })

    // Decides a failed row's fate: retry at a backoff time, or FAILURE with a reason. An
    // unavailable broker retries at `outageRetryAt` with the attempts unchanged.
    const classify = (row: OutboxMessage, error: PublishError, now: number, lease: string, outageRetryAt: number) =>
      Effect.gen(function* () {
        const reason = describe(error)
        if (error._tag === "BrokerUnavailableError") {
          return {
            id: row.id,
            owner: lease,
            attempts: row.attempts,
            reason: `${reason} (broker unavailable: no attempt counted)`,
            retryAt: outageRetryAt
          } satisfies Transition.PublishFailure
        }
        const attempts = row.attempts + 1
        const give = (why: string): Transition.PublishFailure => ({
          id: row.id,
          owner: lease,
          attempts,
          reason: why,
          retryAt: null
        })
        if (error._tag === "PermanentPublishError") return give(reason)
        if (error._tag === "UnknownPartitionError") {
          yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "unknown_partition" }), 1)
          if (s.unknownPartition === "fail") {
            return give(
              `${reason}; unknown-partition recovery is off (OUTBOX_RELAY_UNKNOWN_PARTITION=fail): fix the record's partition or grow the topic, then requeue`
            )
          }
          const synced = yield* syncPartitions(error.topic, error.partition)
          if (synced !== undefined) return give(`${reason}; partition sync failed: ${synced}`)
        }
        if (attempts >= s.maxAttempts) {
          yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "exhausted" }), 1)
          return give(`gave up after ${attempts} attempts: ${reason}`)
        }
        const delay = yield* retryDelay(s.backoff, attempts)
        if (Option.isNone(delay))
          return give(`gave up after ${attempts} attempts (backoff schedule finished): ${reason}`)
        return { id: row.id, owner: lease, attempts, reason, retryAt: now + Math.max(0, Math.round(delay.value)) }
      })

    // R3.3 "sync": make the broker's partition count cover the partition. Returns an error text,
    // or undefined when the record may be retried.
    const syncPartitions = (topic: string, partition: number) =>
      Effect.gen(function* () {
        const admin = yield* Effect.serviceOption(BrokerAdmin)
        if (Option.isNone(admin)) return "no BrokerAdmin service is provided"
        const count = yield* admin.value.partitionCount(topic)
        if (Option.isNone(count)) return `topic ${topic} does not exist`
        if (count.value > partition) return undefined
        const above = PartitionLimit.aboveMaximum(partition, s.maxPartition)
        if (above !== undefined) return `${above}; the topic is not grown`
        yield* admin.value.growPartitions(topic, partition + 1)
        yield* Effect.logWarning(`outbox relay grew ${topic} from ${count.value} to ${partition + 1} partitions (R3.3)`)
        return undefined
      }).pipe(Effect.catch((error) => Effect.succeed(error.message)))

    const run: Effect.Effect<void, never, Requirements> = Effect.gen(function* () {
      const signal = yield* Queue.sliding<void>(1)
      const wakeUp = yield* Effect.serviceOption(WakeUp)
      if (Option.isSome(wakeUp)) {
        yield* Effect.forkChild(Stream.runForEach(wakeUp.value.signals, () => Queue.offer(signal, undefined)))
      }
      const idle = Effect.raceFirst(Queue.take(signal), Effect.sleep(s.pollInterval)).pipe(
        Effect.andThen(Queue.clear(signal)),
        Effect.raceFirst(Deferred.await(stopped))
      )
      const wake = Effect.asVoid(Queue.offer(signal, undefined))
      // One permit per batch in flight: taken before its claim, given back when it is settled.
      const slots = yield* Semaphore.make(s.pipelineDepth)
      while (!(yield* Deferred.isDone(stopped))) {
        yield* Semaphore.take(slots, 1)
        if (yield* Deferred.isDone(stopped)) {
          yield* Semaphore.release(slots, 1)
          break
        }
        // The broker is unavailable: claim nothing until the outage backoff has passed.
        const pause = pausedUntil - (yield* Clock.currentTimeMillis)
        if (pause > 0) {
          yield* Effect.sleep(Duration.millis(pause)).pipe(Effect.raceFirst(Deferred.await(stopped)))
          yield* Semaphore.release(slots, 1)
          continue
        }
        const claimed = yield* Deferred.make<number, OutboxStoreError>()
        // A child fiber: interrupting the loop (a crash) interrupts every batch in flight.
        yield* Effect.forkChild(
          batch({ claimed, wake }).pipe(
            Effect.catch((error) =>
              Effect.logWarning(`outbox relay ${owner}: batch failed, retrying at next poll: ${error.message}`)
            ),
            Effect.ensuring(Semaphore.release(slots, 1))
          )
        )
        const count = yield* Deferred.await(claimed).pipe(Effect.orElseSucceed(() => 0))
        // A full batch suggests more work: claim again at once; otherwise wait for news.
        if (count < s.batchSize) yield* idle
        else yield* Effect.yieldNow
      }
      // Stopped: let the batches in flight finish (all permits back means none is left).
      yield* Semaphore.take(slots, s.pipelineDepth)
    }).pipe(Effect.annotateLogs({ relay: owner }))

    return {
      owner,
      runOnce,
      run,
      inFlight: Effect.map(Ref.get(inFlight), (batches) => batches.flatMap((b) => b.rows)),
      releaseInFlight: Effect.gen(function* () {
        const batches = yield* Ref.getAndSet(inFlight, [])
        const moves = batches.flatMap((b) =>
          b.rows.map((row) => ({ id: row.id, owner: b.lease, reason: "relay shut down" }))
        )
        if (moves.length > 0) yield* Transition.releaseClaimed(moves)
      }),
      // internal: the graceful stop signal
      [stopKey]: stopped
    } as Relay
  })

const stopKey = Symbol.for("@effect-outbox/core/Relay/stop")

// A failed row about to go to FAILURE, and whether its error was retriable (its attempts ran out).
interface GiveUp {
  readonly row: OutboxMessage
  readonly failure: Transition.PublishFailure
  readonly retriable: boolean
}

// A claimed batch: its rows, the lease owner they are held under, and the claim's number.
interface Claimed {
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly lease: string
  readonly serial: number
}

// How a batch run by the pipelined loop talks back to it.
interface Pipeline {
  /** Completed with the claim's size, or its failure, as soon as the claim returns. */
  readonly claimed: Deferred.Deferred<number, OutboxStoreError>
  /** Asks the loop for another claim (a wake-up of the relay's own). */
  readonly wake: Effect.Effect<void>
}

/**
 * Starts a relay in the current scope. Closing the scope shuts it down gracefully: it stops
 * claiming, lets the batches in flight finish (up to `shutdownTimeout`), and otherwise
 * interrupts them and hands all their rows back to `PENDING`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = (settings: Partial<Settings> = {}): Effect.Effect<Relay, never, Requirements | Scope.Scope> =>
  Effect.gen(function* () {
    const s: Settings = { ...defaults, ...settings }
    const relay = yield* make(s)
    const stopped = (relay as unknown as Record<symbol, Deferred.Deferred<void>>)[stopKey]!
    const fiber = yield* Effect.forkDetach(relay.run)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Deferred.succeed(stopped, undefined)
        const finished = yield* Fiber.await(fiber).pipe(Effect.timeoutOption(s.shutdownTimeout))
        if (Option.isNone(finished)) {
          yield* Fiber.interrupt(fiber)
          yield* relay.releaseInFlight.pipe(
            Effect.catch((error) =>
              Effect.logWarning(
                `outbox relay ${relay.owner}: handing back rows failed; stale recovery will: ${error.message}`
              )
            )
          )
        }
        yield* Effect.logInfo(`outbox relay ${relay.owner} stopped`)
      })
    )
    return relay
  })

/**
 * A relay running for the life of the layer, configured from {@link config}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, Config.ConfigError, Requirements> = Layer.effectDiscard(
  Effect.gen(function* () {
    const settings = yield* config
    yield* start(settings)
  })
)

/**
 * A relay running for the life of the layer, with explicit settings.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (settings: Partial<Settings>): Layer.Layer<never, never, Requirements> =>
  Layer.effectDiscard(start(settings))
