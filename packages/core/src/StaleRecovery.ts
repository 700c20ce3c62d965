/**
 * Stale dispatch recovery: rows left `DISPATCHING` past their lease (a relay crashed or
 * hung) are taken back. A timeout does not prove that nothing reached Kafka, so each row's
 * target is probed for a record carrying its event id first, from the row's claim time on (the
 * record cannot be older than the claim that sent it):
 *
 * - found → `PUBLISHED` with that receipt, conditional on the lease it judged (a row re-claimed
 *   meanwhile is left alone);
 * - not found → back to `PENDING`, conditional on the same lease;
 * - probe error → left for a later round; once its lease expired more than `giveUpAfter` ago it
 *   is requeued anyway, with the reason (a duplicate is possible; consumers dedupe by event id).
 *
 * The rules that make it converge:
 *
 * - one recoverer at a time per outbox table: a round runs only under the store's recovery lease
 *   (`OutboxStore.acquireRecoveryLease`), renewed before it settles anything, so two relays never
 *   judge the same rows;
 * - expiry is judged by the store's clock (the database's `now()`), never the host's;
 * - rounds page through the expired leases (`OutboxStore.findStale` with a cursor) and start over
 *   after the last page, so rows that cannot be probed never hide the others;
 * - logs and metrics count the transitions that applied, not the ones attempted.
 *
 * Rows of one key are handled in creation order and, like in the relay, once a row of a key is
 * requeued or left, the later rows of that key are requeued or left too: a key's published rows
 * always form a prefix of its creation order (see `docs/ordering.md`; the rule is `KeyOrder`, the
 * moves are made in `internal/stale/settle.ts`). A page always holds all of a key's expired rows.
 *
 * A row whose explicit partition the topic does not have takes the unknown-partition path
 * (`UnknownPartition`, the relay's policy): `"sync"` grows the topic and requeues, `"fail"` moves
 * it to `FAILURE` with a reason.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { BrokerProbe } from "./BrokerProbe.ts"
import type { StoreError } from "./Errors.ts"
import * as Jobs from "./internal/jobs.ts"
import { judge } from "./internal/stale/judge.ts"
import { settle } from "./internal/stale/settle.ts"
import * as Vars from "./internal/variables.ts"
import type { OutboxMessage } from "./OutboxMessage.ts"
import { OutboxStore, type StaleCursor, type TransitionOutcome } from "./OutboxStore.ts"
import * as PartitionLimit from "./PartitionLimit.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"
import * as UnknownPartition from "./UnknownPartition.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Stale rows judged per round (a page; a key's rows are never split, so a page may hold more). */
  readonly batchSize: number
  /** Time between rounds. */
  readonly interval: Duration.Duration
  readonly unknownPartition: UnknownPartition.Policy
  /** `"sync"` never grows a topic past this partition (`OUTBOX_MAX_PARTITION`, default 1023). */
  readonly maxPartition?: number
  /**
   * A row whose lease expired longer ago than this and whose probe still fails is requeued
   * with the probe's error as its reason (a duplicate is possible), instead of waiting forever.
   */
  readonly giveUpAfter: Duration.Duration
  /**
   * How long the recovery lease lasts without renewal; it is renewed every round and while
   * probing. A crashed recoverer's lease lapses after this, and another relay takes over.
   * Default: 4 × `interval`, at least 10 s.
   */
  readonly leaseTtl?: Duration.Duration | undefined
  /** The name this recoverer holds the lease under. Default: a fresh `stale-recovery-<uuid>`. */
  readonly owner?: string | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  batchSize: Vars.stale.batchSize.value,
  interval: Vars.stale.interval.value,
  unknownPartition: Vars.relay.unknownPartition.value,
  giveUpAfter: Vars.stale.giveUpAfter.value
}

const leaseTtlMillis = (s: Settings): number =>
  s.leaseTtl !== undefined ? Duration.toMillis(s.leaseTtl) : Math.max(4 * Duration.toMillis(s.interval), 10_000)

/**
 * `OUTBOX_STALE_BATCH_SIZE`, `OUTBOX_STALE_INTERVAL`, `OUTBOX_RELAY_UNKNOWN_PARTITION`,
 * `OUTBOX_STALE_GIVE_UP_AFTER`, `OUTBOX_STALE_LEASE_TTL`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  batchSize: Vars.stale.batchSize.config,
  interval: Vars.stale.interval.config,
  unknownPartition: UnknownPartition.config,
  maxPartition: PartitionLimit.config,
  giveUpAfter: Vars.stale.giveUpAfter.config,
  leaseTtl: Vars.stale.leaseTtl.config.pipe(Config.map((ttl) => (Option.isSome(ttl) ? ttl.value : undefined)))
})

/**
 * A crash-test seam: called after the probes of a round, before any row is settled.
 *
 * @since 0.1.0
 * @category testing
 */
export interface HooksShape {
  readonly afterProbe: (rows: ReadonlyArray<OutboxMessage>) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category testing
 */
export const Hooks = Context.Reference<HooksShape>("@effect-outbox/core/StaleRecovery/Hooks", {
  defaultValue: () => ({ afterProbe: () => Effect.void })
})

/**
 * What one round did. `found`, `requeued` and `failed` count transitions that applied; a row
 * that moved meanwhile (re-claimed, settled by its relay) counts in `skipped`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RoundResult {
  /** Expired leases judged this round. */
  readonly stale: number
  readonly found: number
  /** Requeued, including `gaveUp`. */
  readonly requeued: number
  /** Requeued because the probe kept failing past `giveUpAfter`. */
  readonly gaveUp: number
  readonly failed: number
  readonly left: number
  readonly skipped: number
  /** Where the next round starts (absent: from the oldest lease). */
  readonly next: StaleCursor | undefined
  /** Another recoverer's name when it holds the lease: this round did nothing. */
  readonly heldBy: string | undefined
}

const emptyRound = (next: StaleCursor | undefined, heldBy?: string): RoundResult => ({
  stale: 0,
  found: 0,
  requeued: 0,
  gaveUp: 0,
  failed: 0,
  left: 0,
  skipped: 0,
  next,
  heldBy
})

const applied = (outcomes: ReadonlyArray<TransitionOutcome>) =>
  outcomes.filter((outcome) => outcome.outcome === "applied").length

/**
 * One round: take the recovery lease, read a page of expired leases, probe, renew the lease,
 * settle. `after` is the previous round's `next` (absent: from the oldest lease); when the page
 * after it is empty the round starts over from the oldest lease. The lease is kept (renewed
 * each round) until {@link release} or its TTL lapses.
 *
 * @since 0.1.0
 * @category recovery
 */
export const runOnce = (
  settings: Partial<Settings> = {},
  options: {
    readonly after?: StaleCursor | undefined
    /** After the last page, start over from the oldest lease in the same round (default `true`). */
    readonly startOver?: boolean | undefined
  } = {}
): Effect.Effect<RoundResult, StoreError, OutboxStore | BrokerProbe> =>
  settings.owner !== undefined
    ? round({ ...defaults, ...settings }, settings.owner, options.after, options.startOver ?? true)
    : // A one-off round (the CLI, a test): its own name, and the lease given back at the end.
      Effect.suspend(() => {
        const owner = freshOwner()
        return round({ ...defaults, ...settings }, owner, options.after, options.startOver ?? true).pipe(
          Effect.ensuring(release(owner))
        )
      })

/**
 * Gives the recovery lease up, if `owner` holds it (errors are logged: the lease lapses anyway).
 *
 * @since 0.1.0
 * @category recovery
 */
export const release = (owner: string): Effect.Effect<void, never, OutboxStore> =>
  OutboxStore.use((store) => store.releaseRecoveryLease(owner)).pipe(
    Effect.catch((error) => Effect.logWarning(`outbox stale recovery: could not release its lease: ${error.message}`))
  )

const round = (
  s: Settings,
  owner: string,
  after: StaleCursor | undefined,
  startOver: boolean
): Effect.Effect<RoundResult, StoreError, OutboxStore | BrokerProbe> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const hooks = yield* Hooks
    const ttlMillis = leaseTtlMillis(s)
    const lease = yield* store.acquireRecoveryLease({ owner, ttlMillis })
    if (!lease.acquired) {
      yield* Effect.logDebug(`outbox stale recovery: ${lease.owner} holds the recovery lease; skipping this round`)
      return emptyRound(after, lease.owner)
    }
    let page = yield* store.findStale({ limit: s.batchSize, after })
    if (page.rows.length === 0 && after !== undefined && startOver)
      page = yield* store.findStale({ limit: s.batchSize })
    const stale = [...page.rows].sort((a, b) => a.seq - b.seq)
    if (stale.length === 0) return emptyRound(page.next)

    // Probes may take long (30 s each by default): keep the lease alive meanwhile.
    const renewEvery = Duration.millis(Math.max(1, Math.floor(ttlMillis / 3)))
    const heartbeat = yield* Effect.forkChild(
      Effect.delay(Jobs.every(renewEvery, Effect.ignore(store.acquireRecoveryLease({ owner, ttlMillis }))), renewEvery)
    )
    const verdicts = yield* Effect.forEach(stale, (row) => judge(row, s), { concurrency: 8 }).pipe(
      Effect.ensuring(Fiber.interrupt(heartbeat))
    )
    yield* hooks.afterProbe(stale)

    const { failed, gaveUpAttempted, left, published, requeue } = settle(stale, verdicts, page.now, s.giveUpAfter)

    // Probing may outlast the lease: settle only while still the one recoverer.
    const renewed = yield* store.acquireRecoveryLease({ owner, ttlMillis })
    if (!renewed.acquired) {
      yield* Effect.logWarning(
        `outbox stale recovery: lost the recovery lease to ${renewed.owner} while probing; ` +
          `${stale.length} rows left to it (raise OUTBOX_STALE_LEASE_TTL if rounds take this long)`
      )
      return { ...emptyRound(after, renewed.owner), stale: stale.length, left: stale.length }
    }

    const found = published.length > 0 ? applied(yield* Transition.markFoundStale(published)) : 0
    const requeueOutcomes = requeue.length > 0 ? yield* Transition.requeueStale(requeue) : []
    const requeued = applied(requeueOutcomes)
    const gaveUp = requeueOutcomes.filter((o, i) => o.outcome === "applied" && requeue[i]!.reason !== undefined).length
    const failedCount = failed.length > 0 ? applied(yield* Transition.failDispatching(failed)) : 0
    const skipped = published.length + requeue.length + failed.length - found - requeued - failedCount

    const count = (result: string, n: number) =>
      n === 0 ? Effect.void : Metric.update(Metric.withAttributes(Telemetry.staleRecovered, { result }), n)
    yield* count("found", found)
    yield* count("requeued", requeued - gaveUp)
    yield* count("gave_up", gaveUp)
    yield* count("failed", failedCount)
    yield* count("probe_error", left)
    yield* Effect.logInfo(
      `outbox stale recovery: ${stale.length} expired leases, ${found} found on the broker, ` +
        `${requeued} requeued (${gaveUp} without a verdict after ${gaveUpAttempted} probe give-ups), ` +
        `${failedCount} failed, ${left} left for a later round, ${skipped} moved meanwhile`
    ).pipe(
      Effect.annotateLogs({
        "outbox.stale.found": found,
        "outbox.stale.requeued": requeued,
        "outbox.stale.failed": failedCount,
        "outbox.stale.left": left,
        "outbox.stale.skipped": skipped
      })
    )
    return {
      stale: stale.length,
      found,
      requeued,
      gaveUp,
      failed: failedCount,
      left,
      skipped,
      next: page.next,
      heldBy: undefined
    }
  }).pipe(Effect.withSpan(Telemetry.spans.staleRecovery))

const freshOwner = () => `stale-recovery-${randomUUID()}`

/**
 * Runs a round every `interval`, forever, paging through the expired leases under one recovery
 * lease (renewed each round, given back when interrupted). Errors of a round are logged; the
 * next round retries.
 *
 * @since 0.1.0
 * @category recovery
 */
export const run = (settings: Partial<Settings> = {}): Effect.Effect<never, never, OutboxStore | BrokerProbe> =>
  Effect.suspend(() => {
    const s: Settings = { ...defaults, ...settings }
    const owner = s.owner ?? freshOwner()
    let after: StaleCursor | undefined
    return Effect.suspend(() => round(s, owner, after, true)).pipe(
      Effect.tap((result) =>
        Effect.sync(() => {
          after = result.next
        })
      ),
      Effect.catch((error) => Effect.logWarning(`outbox stale recovery round failed: ${error.message}`)),
      (everyRound) => Jobs.every(s.interval, everyRound),
      Effect.ensuring(release(owner))
    )
  })

/**
 * Starts {@link run} in the current scope.
 *
 * @since 0.1.0
 * @category recovery
 */
export const start = (
  settings: Partial<Settings> = {}
): Effect.Effect<void, never, OutboxStore | BrokerProbe | Scope.Scope> =>
  Effect.asVoid(Effect.forkScoped(run(settings)))

/**
 * Recovery running for the life of the layer, configured from {@link config}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, Config.ConfigError, OutboxStore | BrokerProbe> = Layer.effectDiscard(
  Effect.gen(function* () {
    yield* start(yield* config)
  })
)

/**
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (settings: Partial<Settings>): Layer.Layer<never, never, OutboxStore | BrokerProbe> =>
  Layer.effectDiscard(start(settings))
