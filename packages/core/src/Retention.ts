/**
 * Retention: finished outbox rows older than a configured age are deleted in bounded
 * batches on a schedule, so the table does not grow without bound and a purge never holds long
 * locks.
 *
 * A round deletes batch after batch while they come back full, up to `maxBatchesPerRound`; a
 * round that stops at that bound (a backlog remains) is followed by the next one after
 * `catchUpInterval` instead of `interval`, so retention keeps pace with any churn the database can
 * delete (measured in `bench/JOURNAL.md`), while a single round still never runs unbounded.
 * The same schedule runs the inbox's rounds ({@link startInbox}): `InboxStore.purge` forgets whole
 * spans of processed-message records (PostgreSQL drops partitions, never deleting a row) and so
 * sets the deduplication window.
 *
 * Which rows count as finished is configurable. The default is `SUCCESS`, `PUSHED_FAILURE`
 * (consumption ended) and `PUBLISHED` (on the broker; a deployment whose consumers report back
 * through the outbox should drop `PUBLISHED` so rows are kept until processed). `FAILURE` is not
 * purged by default: those rows wait for an operator (requeue or purge on purpose).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { OutboxValidationError, type StoreError } from "./Errors.ts"
import { InboxStore } from "./InboxStore.ts"
import * as Jobs from "./internal/jobs.ts"
import * as Vars from "./internal/variables.ts"
import * as Lifecycle from "./Lifecycle.ts"
import { OutboxStore } from "./OutboxStore.ts"
import * as Telemetry from "./Telemetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Statuses eligible for deletion: terminal ones or `PUBLISHED`. */
  readonly statuses: ReadonlyArray<Lifecycle.OutboxStatus>
  /** Rows last updated longer ago than this are deleted. */
  readonly olderThan: Duration.Duration
  /** Rows deleted per store call. */
  readonly batchSize: number
  /** Upper bound on store calls per round, so one round never runs unbounded. */
  readonly maxBatchesPerRound: number
  /** Time between rounds. */
  readonly interval: Duration.Duration
  /** Time before the next round when a round stopped at `maxBatchesPerRound` (a backlog remains). */
  readonly catchUpInterval: Duration.Duration
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  statuses: Vars.retention.statuses.value as ReadonlyArray<Lifecycle.OutboxStatus>,
  olderThan: Vars.retention.olderThan.value,
  batchSize: Vars.retention.batchSize.value,
  maxBatchesPerRound: Vars.retention.maxBatchesPerRound.value,
  interval: Vars.retention.interval.value,
  catchUpInterval: Vars.retention.catchUpInterval.value
}

/**
 * `OUTBOX_RETENTION_STATUSES` (comma-separated), `OUTBOX_RETENTION_OLDER_THAN`,
 * `OUTBOX_RETENTION_BATCH_SIZE`, `OUTBOX_RETENTION_MAX_BATCHES`, `OUTBOX_RETENTION_INTERVAL`,
 * `OUTBOX_RETENTION_CATCH_UP_INTERVAL`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  statuses: Vars.retention.statuses.config,
  olderThan: Vars.retention.olderThan.config,
  batchSize: Vars.retention.batchSize.config,
  maxBatchesPerRound: Vars.retention.maxBatchesPerRound.config,
  interval: Vars.retention.interval.config,
  catchUpInterval: Vars.retention.catchUpInterval.config
}).pipe(Config.map((raw) => ({ ...raw, statuses: raw.statuses as ReadonlyArray<Lifecycle.OutboxStatus> })))

/**
 * Checks that only finished statuses are eligible: deleting `PENDING`, `PREQUEUED`,
 * `DISPATCHING` or `UNDER_PROCESSING` rows would lose events.
 *
 * @since 0.1.0
 * @category validation
 */
export const validate = (settings: Settings): OutboxValidationError | undefined => {
  for (const status of settings.statuses) {
    if (!(Lifecycle.statuses as ReadonlyArray<string>).includes(status)) {
      return new OutboxValidationError({ field: "retention.statuses", reason: `${status} is not an outbox status` })
    }
    if (!Lifecycle.isPurgeable(status)) {
      return new OutboxValidationError({
        field: "retention.statuses",
        reason: `${status} is not finished; only terminal statuses and PUBLISHED may be purged`
      })
    }
  }
  if (!(settings.batchSize > 0 && settings.maxBatchesPerRound > 0)) {
    return new OutboxValidationError({ field: "retention.batchSize", reason: "batch size and max batches must be > 0" })
  }
  return undefined
}

/**
 * What one round of a purge loop did.
 *
 * @since 0.1.0
 * @category models
 */
export interface Round {
  readonly deleted: number
  /** The round stopped at `maxBatchesPerRound` with its last batch full: a backlog remains. */
  readonly behind: boolean
}

/**
 * Calls `purgeBatch(limit)` until a batch comes back short or `maxBatchesPerRound` batches ran.
 *
 * @since 0.1.0
 * @category retention
 */
export const drain = <E, R>(
  purgeBatch: (limit: number) => Effect.Effect<number, E, R>,
  bounds: Pick<Settings, "batchSize" | "maxBatchesPerRound">
): Effect.Effect<Round, E, R> =>
  Effect.gen(function* () {
    let deleted = 0
    for (let batch = 0; batch < bounds.maxBatchesPerRound; batch++) {
      const n = yield* purgeBatch(bounds.batchSize)
      deleted += n
      if (n < bounds.batchSize) return { deleted, behind: false }
    }
    return { deleted, behind: true }
  })

const round = (s: Settings): Effect.Effect<Round, StoreError | OutboxValidationError, OutboxStore> =>
  Effect.gen(function* () {
    const invalid = validate(s)
    if (invalid !== undefined) return yield* invalid
    const store = yield* OutboxStore
    const now = yield* Clock.currentTimeMillis
    const olderThan = now - Duration.toMillis(s.olderThan)
    const result = yield* drain((limit) => store.purge({ statuses: s.statuses, olderThan, limit }), s)
    if (result.deleted > 0) {
      yield* Metric.update(Telemetry.purged, result.deleted)
      yield* Effect.logInfo(
        `outbox retention purged ${result.deleted} rows (${s.statuses.join(", ")}) older than ${Duration.format(s.olderThan)}` +
          (result.behind ? "; more remain, next round soon" : "")
      )
    }
    return result
  }).pipe(Effect.withSpan(Telemetry.spans.retention))

/**
 * One round: deletes eligible rows in batches of `batchSize` until a batch comes back short or
 * `maxBatchesPerRound` is reached. Returns how many rows were deleted.
 *
 * @since 0.1.0
 * @category retention
 */
export const runOnce = (
  settings: Partial<Settings> = {}
): Effect.Effect<number, StoreError | OutboxValidationError, OutboxStore> =>
  Effect.map(round({ ...defaults, ...settings }), (r) => r.deleted)

// Rounds forever: the next after `catchUpInterval` while behind, else after `interval`.
const loop = <E extends { readonly message: string }, R>(
  name: string,
  once: Effect.Effect<Round, E, R>,
  s: Pick<Settings, "interval" | "catchUpInterval">
): Effect.Effect<never, never, R> =>
  Jobs.repeatForever(
    once.pipe(
      Effect.catch((error) =>
        Effect.as(Effect.logWarning(`${name} round failed: ${error.message}`), { deleted: 0, behind: false })
      )
    ),
    Schedule.forever.pipe(
      Schedule.setInputType<Round>(),
      Schedule.modifyDelay(({ input }) => Effect.succeed(input.behind ? s.catchUpInterval : s.interval))
    )
  )

/**
 * A round every `interval` (every `catchUpInterval` while behind), forever. Invalid settings fail
 * at once; store errors are logged and retried next round.
 *
 * @since 0.1.0
 * @category retention
 */
export const run = (settings: Partial<Settings> = {}): Effect.Effect<never, OutboxValidationError, OutboxStore> => {
  const s: Settings = { ...defaults, ...settings }
  const invalid = validate(s)
  if (invalid !== undefined) return Effect.fail(invalid)
  return loop("outbox retention", round(s), s)
}

/**
 * Starts {@link run} in the current scope (fails at once on invalid settings).
 *
 * @since 0.1.0
 * @category retention
 */
export const start = (
  settings: Partial<Settings> = {}
): Effect.Effect<void, OutboxValidationError, OutboxStore | Scope.Scope> =>
  Effect.gen(function* () {
    const invalid = validate({ ...defaults, ...settings })
    if (invalid !== undefined) return yield* invalid
    yield* Effect.forkScoped(run(settings))
  })

/**
 * Retention running for the life of the layer, configured from {@link config}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, Config.ConfigError | OutboxValidationError, OutboxStore> = Layer.effectDiscard(
  Effect.gen(function* () {
    yield* start(yield* config)
  })
)

/**
 * One round of inbox retention: the spans of processed-message records older than `olderThan`
 * are forgotten (a store that deletes row by row does it in the outbox's bounded batches). A
 * store that keeps records in partitions also creates the partitions ahead in a round, so an
 * infinite `olderThan` is a round that only does that.
 *
 * @since 0.1.0
 * @category retention
 */
export const runInboxOnce = (
  olderThan: Duration.Duration,
  settings: Partial<Settings> = {}
): Effect.Effect<Round, StoreError, InboxStore> =>
  Effect.gen(function* () {
    const s: Settings = { ...defaults, ...settings }
    const store = yield* InboxStore
    const cutOff = (yield* Clock.currentTimeMillis) - Duration.toMillis(olderThan)
    const result = yield* drain((limit) => store.purge(cutOff, limit), s)
    if (result.deleted > 0) {
      yield* Metric.update(Telemetry.inboxPurged, result.deleted)
      yield* Effect.logInfo(
        `inbox retention purged ${result.deleted} processed-message records` +
          (result.behind ? "; more remain, next round soon" : "")
      )
    }
    return result
  }).pipe(Effect.withSpan(Telemetry.spans.inboxRetention))

/**
 * Inbox retention rounds in the current scope, on the outbox retention's schedule.
 *
 * @since 0.1.0
 * @category retention
 */
export const startInbox = (
  olderThan: Duration.Duration,
  settings: Partial<Settings> = {}
): Effect.Effect<void, never, InboxStore | Scope.Scope> => {
  const s: Settings = { ...defaults, ...settings }
  return Effect.asVoid(Effect.forkScoped(loop("inbox retention", runInboxOnce(olderThan, s), s)))
}
