/**
 * The dispatcher: wake-up signal or poll interval → claim a batch under a lease →
 * publish the whole batch in one `Publisher.publish` call → record the receipts in one batched
 * compare-and-set → retry with backoff, or `FAILURE` with a reason.
 *
 * Per-key order rests on three rules, explained in `docs/ordering.md`:
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
 *    follow the failed one when it is retried (`KeyOrder`, shared with stale recovery). A row
 *    given up (`FAILURE`) keeps blocking its key by default (`failedHead: "block"`) until an
 *    operator requeues or skips it.
 *
 * Outages: a `BrokerUnavailableError` (or this relay's own publish timeout) says
 * nothing about the record, so it never counts an attempt. The rows go back to `PENDING` after an
 * outage backoff (`outageBackoff`, jittered, growing with each outage in a row) and the loop
 * claims nothing until then. Only errors about the record count towards `maxAttempts`, and
 * before any row goes to `FAILURE` the broker is probed (`BrokerProbe`, when provided): a record
 * that landed ends `PUBLISHED`.
 *
 * Pipelining: the loop ({@link Relay.run}) keeps up to `pipelineDepth` batches in flight. It
 * claims batch N+1 while batch N is published, and batch N is marked while N+1 is on the wire;
 * outcomes ready while a mark statement runs go together in the next one. Order needs no rule of
 * its own: by rule 1 a claim takes nothing of a key that has a `DISPATCHING` row, and a batch's
 * rows stay `DISPATCHING` until its mark commits, so two batches in flight never share a key, as
 * two relays never do. Each batch has a lease owner of its own (`<owner>#<n>`): a batch that
 * outlives its lease (stale recovery requeued its rows and a later batch claimed them again)
 * cannot fail or hand back rows it no longer holds, exactly as a stale relay could not.
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
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Ref from "effect/Ref"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Backoff from "./Backoff.ts"
import type { StoreError } from "./Errors.ts"
import { dispatch } from "./internal/relay/dispatch.ts"
import * as Heartbeat from "./internal/relay/heartbeat.ts"
import * as Loop from "./internal/relay/loop.ts"
import * as Marks from "./internal/relay/marks.ts"
import * as Outage from "./internal/relay/outage.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import * as Vars from "./internal/variables.ts"
import type { OutboxMessage } from "./OutboxMessage.ts"
import type { FailedHeadPolicy, OutboxStore } from "./OutboxStore.ts"
import * as PartitionLimit from "./PartitionLimit.ts"
import type { Publisher } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"
import * as UnknownPartition from "./UnknownPartition.ts"

// The relays' backoff, kept here for existing imports; it lives in `Backoff`.
export { exponential as backoff, outageDelay, retryDelay } from "./Backoff.ts"
/**
 * What to do when a record targets a partition the broker does not have: `"fail"` or
 * `"sync"` (grow the topic, then retry with an attempt counted). See `UnknownPartition.ts`.
 *
 * @since 0.1.0
 * @category models
 */
export type UnknownPartitionPolicy = UnknownPartition.Policy

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
   * without it, for streams where progress matters more than order.
   */
  readonly failedHead: FailedHeadPolicy
  readonly unknownPartition: UnknownPartitionPolicy
  /** `"sync"` never grows a topic past this partition (`OUTBOX_MAX_PARTITION`, default 1023). */
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
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  batchSize: Vars.relay.batchSize.value,
  maxPerKey: Vars.relay.batchSize.value,
  lease: Vars.relay.lease.value,
  publishTimeout: Vars.relay.publishTimeout.value,
  pollInterval: Vars.relay.pollInterval.value,
  maxAttempts: Vars.relay.maxAttempts.value,
  backoff: Backoff.exponential(Vars.relay.backoffBase.value, Vars.relay.backoffMax.value),
  outageBackoff: Backoff.exponential(Vars.relay.outageBackoffBase.value, Vars.relay.outageBackoffMax.value),
  failedHead: Vars.relay.failedHead.value,
  unknownPartition: Vars.relay.unknownPartition.value,
  shutdownTimeout: Vars.relay.shutdownTimeout.value,
  pipelineDepth: Vars.relay.pipelineDepth.value
}

/**
 * Settings from the environment (`OUTBOX_RELAY_*`), defaulting to {@link defaults}.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  owner: Vars.relay.owner.config,
  batchSize: Vars.relay.batchSize.config,
  maxPerKey: Vars.relay.maxPerKey.config,
  lease: Vars.relay.lease.config,
  publishTimeout: Vars.relay.publishTimeout.config,
  pollInterval: Vars.relay.pollInterval.config,
  maxAttempts: Vars.relay.maxAttempts.config,
  backoffBase: Vars.relay.backoffBase.config,
  backoffMax: Vars.relay.backoffMax.config,
  outageBackoffBase: Vars.relay.outageBackoffBase.config,
  outageBackoffMax: Vars.relay.outageBackoffMax.config,
  failedHead: Vars.relay.failedHead.config,
  unknownPartition: UnknownPartition.config,
  maxPartition: PartitionLimit.config,
  shutdownTimeout: Vars.relay.shutdownTimeout.config,
  pipelineDepth: Vars.relay.pipelineDepth.config
}).pipe(
  Config.map(
    ({ backoffBase, backoffMax, maxPerKey, outageBackoffBase, outageBackoffMax, owner, ...rest }): Settings => ({
      ...rest,
      ...(Option.isSome(owner) ? { owner: owner.value } : {}),
      maxPerKey: Option.getOrElse(maxPerKey, () => rest.batchSize),
      backoff: Backoff.exponential(backoffBase, backoffMax),
      outageBackoff: Backoff.exponential(outageBackoffBase, outageBackoffMax)
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

type Requirements = OutboxStore | Publisher

// 48 random bits: two relays sharing an owner id would share leases.
const makeOwner = Effect.map(
  Effect.all([Random.nextIntBetween(0, 0xffffff), Random.nextIntBetween(0, 0xffffff)]),
  ([a, b]) => `relay-${a.toString(16).padStart(6, "0")}${b.toString(16).padStart(6, "0")}`
)

const validate = (s: Settings): Effect.Effect<void> =>
  Effect.gen(function* () {
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
  })

/**
 * A relay instance: one owner id, its batch step and its loop.
 *
 * @since 0.1.0
 * @category models
 */
export interface Relay {
  readonly owner: string
  /** Claims and handles one batch (claim → publish → mark), on its own: no pipelining. */
  readonly runOnce: Effect.Effect<BatchResult, StoreError, Requirements>
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
  readonly releaseInFlight: Effect.Effect<void, StoreError, OutboxStore>
  /** When its last claim ended (epoch millis, 0 before any): a running loop claims every poll interval. */
  readonly lastClaimAt: Effect.Effect<number>
}

/**
 * Builds a relay. The default owner id comes from `Random`, so a seeded run replays it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Partial<Settings> = {}): Effect.Effect<Relay> =>
  Effect.map(build({ ...defaults, ...settings }), (handle) => handle.relay)

// A relay and the graceful stop of its loop, which only `start` uses.
interface Handle {
  readonly relay: Relay
  /** Stops claiming; `run` returns once the batches in flight are settled. */
  readonly stop: Effect.Effect<void>
}

// A claimed batch: its rows, the lease owner they are held under, and the claim's number.
interface Claimed {
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly lease: string
  readonly serial: number
}

const build = (s: Settings): Effect.Effect<Handle> =>
  Effect.gen(function* () {
    yield* validate(s)
    const owner = s.owner ?? (yield* makeOwner)
    // The batches in flight, each as claimed. A batch leaves when it is settled or its step
    // fails (its rows then wait for stale recovery); an interrupted one stays, for
    // `releaseInFlight`.
    const inFlight = yield* Ref.make<ReadonlyArray<Claimed>>([])
    const stopped = yield* Deferred.make<void>()
    const outage = Outage.make(owner, s.outageBackoff)
    const marks = Marks.make()
    // Claims started so far; a batch compares it at its end to learn whether a claim ran while
    // it held its keys.
    let claims = 0
    const lastClaimAt = yield* Ref.make(0)

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
        Effect.ensuring(Effect.flatMap(Clock.currentTimeMillis, (now) => Ref.set(lastClaimAt, now))),
        Effect.map((rows): Claimed => ({ rows, lease, serial })),
        Effect.tap((claimed) =>
          claimed.rows.length === 0 ? Effect.void : Ref.update(inFlight, (all) => [...all, claimed])
        )
      )
    })

    // One batch: claim, publish, mark. In the pipelined loop, `pipeline` hears the claim's size
    // (or failure) as soon as it is known, so the loop can claim again while this batch goes on.
    const batch = (pipeline?: Loop.Pipeline): Effect.Effect<BatchResult, StoreError, Requirements> =>
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
        const at = (point: CrashPoint, batchRows: ReadonlyArray<OutboxMessage>) => hooks.at(point, owner, batchRows)
        const result = yield* Effect.andThen(
          at("afterClaim", rows),
          dispatch({ owner, settings: s, outage, marks, at }, rows, lease)
        ).pipe(
          Effect.onExit((exit) =>
            Exit.hasInterrupts(exit) ? Effect.void : Ref.update(inFlight, (all) => all.filter((b) => b !== claimed))
          )
        )
        // Rows of this batch's keys may wait behind it: a claim that ran while it was in flight
        // skipped its keys (rule 1), or a key was cut at `maxPerKey`. The keys are free now: ask
        // the loop for another claim instead of leaving those rows to the poll interval.
        const keyed = rows.some((row) => row.key !== null)
        if (pipeline !== undefined && ((keyed && claims > serial) || Loop.cutAtMaxPerKey(rows, s.maxPerKey))) {
          yield* pipeline.wake
        }
        return result
      }).pipe(runningSpan(Telemetry.spans.relayBatch, { attributes: { "outbox.owner": owner } }))

    const relay: Relay = {
      owner,
      runOnce: batch(),
      run: Loop.run({ owner, settings: s, stopped, pausedUntil: outage.pausedUntil, batch }),
      inFlight: Effect.map(Ref.get(inFlight), (batches) => batches.flatMap((b) => b.rows)),
      lastClaimAt: Ref.get(lastClaimAt),
      releaseInFlight: Effect.gen(function* () {
        const batches = yield* Ref.getAndSet(inFlight, [])
        const moves = batches.flatMap((b) =>
          b.rows.map((row) => ({ id: row.id, owner: b.lease, reason: "relay shut down" }))
        )
        if (moves.length > 0) yield* Transition.releaseClaimed(moves)
      })
    }
    return { relay, stop: Deferred.succeed(stopped, undefined).pipe(Effect.asVoid) }
  })

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
    const { relay, stop } = yield* build(s)
    yield* Heartbeat.start(relay.owner) // before the stop below: it ends after the relay stopped
    const fiber = yield* Effect.forkDetach(relay.run)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* stop
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
    yield* start(yield* config)
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
