/**
 * The reconciler: a sweep for outbox rows left `UNDER_PROCESSING`.
 *
 * The consumer that drives the lifecycle writes `UNDER_PROCESSING`, then its work and inbox
 * record (one transaction), then `SUCCESS`. A crash, a lost connection or a rebalance between the
 * inbox commit and the `SUCCESS` write leaves the row `UNDER_PROCESSING` although the work is
 * done; the consumer repairs it only when the record is delivered again, which never happens once
 * the offset was committed. The sweep does not wait for that:
 *
 * - a row `UNDER_PROCESSING` for longer than `minAge` whose event the driving group recorded as
 *   processed (its inbox record, by event id or by the row's broker receipt) moves to `SUCCESS`
 *   through `Transition.finishProcessing`, without running the work again;
 * - a row without such a record for longer than `stuckAfter` is reported: the
 *   `outbox_consumer_stuck` gauge, and a warning naming the rows and the repair.
 *
 * `minAge` keeps the sweep away from records a consumer is processing right now (its own
 * `SUCCESS` write would otherwise race the sweep; either order ends `SUCCESS`).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as Scope from "effect/Scope"
import type { StoreError } from "./Errors.ts"
import * as Inbox from "./Inbox.ts"
import { InboxStore, type ProcessedKey } from "./InboxStore.ts"
import * as Jobs from "./internal/jobs.ts"
import * as Vars from "./internal/variables.ts"
import type { OutboxMessage } from "./OutboxMessage.ts"
import { OutboxStore } from "./OutboxStore.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"

/**
 * A consumer group that drives the lifecycle of its topics' rows (`lifecycle` on).
 *
 * @since 0.1.0
 * @category models
 */
export interface Driver {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  /** Its dedupe identity (default `"event-id"`): which inbox record proves the work done. */
  readonly identity?: Inbox.IdentityStrategy | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Rows `UNDER_PROCESSING` for less than this are left to their consumer. */
  readonly minAge: Duration.Duration
  /** Rows `UNDER_PROCESSING` without an inbox record for longer than this are reported stuck. */
  readonly stuckAfter: Duration.Duration
  /** Rows read per page (oldest first). */
  readonly batchSize: number
  /** Pages per round at most: a round never runs unbounded. */
  readonly maxBatchesPerRound: number
  /** Time between rounds. */
  readonly interval: Duration.Duration
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaults: Settings = {
  minAge: Vars.reconciler.minAge.value,
  stuckAfter: Vars.reconciler.stuckAfter.value,
  batchSize: Vars.reconciler.batchSize.value,
  maxBatchesPerRound: Vars.reconciler.maxBatchesPerRound.value,
  interval: Vars.reconciler.interval.value
}

/**
 * `OUTBOX_RECONCILE_MIN_AGE`, `OUTBOX_RECONCILE_STUCK_AFTER`, `OUTBOX_RECONCILE_BATCH_SIZE`,
 * `OUTBOX_RECONCILE_MAX_BATCHES`, `OUTBOX_RECONCILE_INTERVAL`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  minAge: Vars.reconciler.minAge.config,
  stuckAfter: Vars.reconciler.stuckAfter.config,
  batchSize: Vars.reconciler.batchSize.config,
  maxBatchesPerRound: Vars.reconciler.maxBatchesPerRound.config,
  interval: Vars.reconciler.interval.config
})

/**
 * What one round did.
 *
 * @since 0.1.0
 * @category models
 */
export interface RoundResult {
  /** Rows examined (`UNDER_PROCESSING` for longer than `minAge`). */
  readonly examined: number
  /** Moved to `SUCCESS` (the driving group's inbox record exists). */
  readonly reconciled: ReadonlyArray<OutboxMessage["id"]>
  /** `UNDER_PROCESSING` past `stuckAfter` with no inbox record. */
  readonly stuck: ReadonlyArray<OutboxMessage>
}

/**
 * The inbox keys that prove `row` processed by `driver`: its event identity and, when it has a
 * broker receipt and the group dedupes by offset, the receipt's offset identity.
 *
 * @since 0.1.0
 * @category reconcile
 */
export const keysOf = (row: OutboxMessage, driver: Driver): ReadonlyArray<ProcessedKey> => {
  const keys: Array<ProcessedKey> = [{ consumer: driver.groupId, identity: Inbox.eventIdentity(row.id) }]
  if (row.receipt !== null && driver.identity === "offset") {
    keys.push({ consumer: driver.groupId, identity: Inbox.offsetIdentity(row.receipt) })
  }
  return keys
}

/**
 * The operator's repair for a stuck row, for logs and `effect-outbox status`.
 *
 * @since 0.1.0
 * @category reconcile
 */
export const repairHint = (row: Pick<OutboxMessage, "id" | "topic" | "receipt">): string => {
  const at = row.receipt === null ? row.topic : `${row.receipt.topic}/${row.receipt.partition}@${row.receipt.offset}`
  return (
    `inspect it with \`effect-outbox inspect ${row.id}\`; its record (${at}) was never recorded as processed: ` +
    `if it was dead-lettered, \`effect-outbox dlt replay ${row.topic}.DLT --event-id ${row.id} --execute\`; ` +
    `otherwise make the driving group read it again (restart a stopped consumer, or reset the group's offset to it)`
  )
}

/**
 * One sweep. Store errors fail the round (the next round tries again).
 *
 * @since 0.1.0
 * @category reconcile
 */
export const runOnce = (
  drivers: ReadonlyArray<Driver>,
  settings: Partial<Settings> = {}
): Effect.Effect<RoundResult, StoreError, OutboxStore | InboxStore> =>
  Effect.gen(function* () {
    const s: Settings = { ...defaults, ...settings }
    const store = yield* OutboxStore
    const inbox = yield* InboxStore
    const now = yield* Clock.currentTimeMillis
    const reconciled: Array<OutboxMessage["id"]> = []
    const stuck: Array<OutboxMessage> = []
    const stuckBefore = now - Duration.toMillis(s.stuckAfter)
    // Page by `seq`, so rows left stuck at the head never hide the ones behind them.
    const rows: Array<OutboxMessage> = []
    for (let page = 0; page < s.maxBatchesPerRound; page++) {
      const last = rows[rows.length - 1]
      const batch = yield* store.list({
        statuses: ["UNDER_PROCESSING"],
        updatedBefore: now - Duration.toMillis(s.minAge),
        ...(last === undefined ? {} : { afterSeq: last.seq }),
        limit: s.batchSize
      })
      rows.push(...batch)
      if (batch.length < s.batchSize) break
    }
    for (const row of rows) {
      const keys = drivers.filter((d) => d.topics.includes(row.topic)).flatMap((d) => keysOf(row, d))
      const processed = yield* Effect.findFirst(keys, (key) => inbox.exists(key))
      if (processed._tag === "Some") {
        const finished = yield* Transition.finishProcessing(row.id, "SUCCESS")
        if (finished.outcome === "applied") reconciled.push(row.id)
      } else if (keys.length > 0 && row.updatedAt < stuckBefore) {
        stuck.push(row)
      }
    }
    yield* Metric.update(Telemetry.consumerStuck, stuck.length)
    if (reconciled.length > 0) {
      yield* Metric.update(Telemetry.reconciled, reconciled.length)
      yield* Effect.logInfo(
        `reconciler: ${reconciled.length} row(s) already processed moved UNDER_PROCESSING -> SUCCESS`
      ).pipe(Effect.annotateLogs({ reconciled: reconciled.join(",") }))
    }
    // One line per stuck row, a few per round: enough to act on without flooding the log.
    for (const row of stuck.slice(0, 10)) {
      yield* Effect.logWarning(
        `reconciler: ${row.id} is UNDER_PROCESSING since ${new Date(row.updatedAt).toISOString()} with no ` +
          `processed-message record; ${repairHint(row)}`
      ).pipe(Effect.annotateLogs({ eventId: row.id, topic: row.topic }))
    }
    if (stuck.length > 10) {
      yield* Effect.logWarning(`reconciler: ${stuck.length - 10} more stuck row(s); see \`effect-outbox status\``)
    }
    return { examined: rows.length, reconciled, stuck }
  }).pipe(Effect.withSpan(Telemetry.spans.reconcile))

/**
 * A round every `interval`, forever; a failed round is logged and tried again next time.
 *
 * @since 0.1.0
 * @category reconcile
 */
export const run = (
  drivers: ReadonlyArray<Driver>,
  settings: Partial<Settings> = {}
): Effect.Effect<never, never, OutboxStore | InboxStore> => {
  const s: Settings = { ...defaults, ...settings }
  return Jobs.every(
    s.interval,
    runOnce(drivers, s).pipe(Effect.catch((error) => Effect.logWarning(`reconciler round failed: ${error.message}`)))
  )
}

/**
 * Starts {@link run} in the current scope.
 *
 * @since 0.1.0
 * @category reconcile
 */
export const start = (
  drivers: ReadonlyArray<Driver>,
  settings: Partial<Settings> = {}
): Effect.Effect<void, never, OutboxStore | InboxStore | Scope.Scope> =>
  Effect.asVoid(Effect.forkScoped(run(drivers, settings)))
