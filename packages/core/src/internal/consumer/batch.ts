/**
 * A fetched batch of one partition, in offset order: record by record (`"per-record"`), or in as
 * few transactions as failures allow (`"per-batch"`). Either way each record ends through the
 * record runner, a dead letter parks the rest of its key (with parking on), and the partition
 * commits what finished.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type { ConsumerBatch, ConsumerRecord, Subscription } from "../../ConsumerSource.ts"
import type * as DeadLetter from "../../DeadLetter.ts"
import type * as Inbox from "../../Inbox.ts"
import type { ProcessedKey } from "../../InboxStore.ts"
import type { EventId, OutboxMessage } from "../../OutboxMessage.ts"
import type { ParkedStore } from "../../ParkedStore.ts"
import * as Telemetry from "../../Telemetry.ts"
import type { PartitionState } from "./partition.ts"
import * as Partition from "./partition.ts"
import * as RecordRunner from "./record.ts"

export interface BatchSettings {
  readonly record: RecordRunner.RecordSettings
  readonly parking: boolean
  /**
   * Durable parking: with parking on and a `ParkedStore` in context, parked keys and their
   * records' positions live in the store; parked records are finished for the offset commit and
   * not held in memory.
   */
  readonly parkedStore: ParkedStore["Service"] | undefined
  readonly perBatch: boolean
  readonly subscription: Subscription
  /** Shutting down: leave the rest unfinished (uncommitted) for the next member. */
  readonly stopping: () => boolean
}

type Handled = Effect.Effect<"done" | "parked", DeadLetter.DeadLetterPublishError>

/** One record in its partition: parked behind its key, or run to its end (finished). */
export const handleRecord = (
  settings: BatchSettings,
  state: PartitionState,
  record: ConsumerRecord,
  first?: RecordRunner.FirstTry,
  rows?: ReadonlyMap<string, OutboxMessage>
): Handled =>
  Effect.gen(function* () {
    if (settings.parking && first === undefined && Partition.isParked(state, record)) {
      if (settings.parkedStore === undefined) Partition.park(state, record)
      else {
        // Its position is durable: it no longer holds the partition's commit.
        yield* parkDurably(settings, record)
        Partition.markDone(state, record)
      }
      return "parked" as const
    }
    const result = yield* RecordRunner.runRecord(settings.record, record, first, rows)
    if (result === "dead_lettered" && settings.parking && record.key !== null) {
      // The head's position too: a release runs it again before its successors.
      if (settings.parkedStore !== undefined) yield* parkDurably(settings, record)
      Partition.parkKey(state, record.key)
    }
    Partition.markDone(state, record)
    return "done" as const
  })

/**
 * Records `record`'s position in the parked store. A store that is down, or full (the bound),
 * is waited for like the database: the record is neither dropped nor run out of order.
 */
const parkDurably = (settings: BatchSettings, record: ConsumerRecord) =>
  settings
    .parkedStore!.park(settings.record.groupId, [
      { topic: record.topic, partition: record.partition, key: record.key!, offset: record.offset }
    ])
    .pipe(
      Effect.tapError((error) =>
        Effect.logWarning(`parking ${record.topic}/${record.partition}@${record.offset} waits: ${error.message}`)
      ),
      Effect.retry({
        schedule: settings.record.infrastructureRetry,
        while: (error) => error._tag === "ParkedLimitError" || error.retriable
      }),
      Effect.orDie
    )

/**
 * Durable parking: the partition's parked keys as the store has them now, read before each batch
 * (a key released elsewhere stops parking; a restarted or new owner finds the keys parked).
 */
export const refreshParked = (settings: BatchSettings, state: PartitionState) =>
  Effect.gen(function* () {
    if (!settings.parking || settings.parkedStore === undefined) return
    const keys = yield* settings.parkedStore
      .list({
        consumer: settings.record.groupId,
        topic: state.topic,
        partition: state.partition
      })
      .pipe(Effect.retry({ schedule: settings.record.infrastructureRetry, while: (e) => e.retriable }), Effect.orDie)
    state.parked.clear()
    for (const key of keys) state.parked.set(key.key, [])
  })

/** Processes a fetched batch of `state`'s partition, then commits what finished. */
export const processBatch = (
  settings: BatchSettings,
  state: PartitionState,
  batch: ConsumerBatch
): Effect.Effect<void, DeadLetter.DeadLetterPublishError> =>
  Effect.gen(function* () {
    // Revoked since it was fetched: the partition's new owner processes it; running it here
    // too would run its handlers twice.
    if (!settings.subscription.isCurrent(batch)) return yield* dropRevoked(batch.records)
    Partition.deliver(state, batch)
    state.latest = batch
    yield* refreshParked(settings, state)
    // Stops between records too once the partition is revoked: only the record in flight at the
    // revocation can run on both members.
    const goOn = () => !settings.stopping() && settings.subscription.isCurrent(batch)
    if (settings.perBatch) yield* processInRounds(settings, state, batch.records, goOn)
    else {
      // One read of the batch's local outbox rows instead of one per record (when it fails, each
      // record reads its own).
      const rows = Option.getOrUndefined(yield* Effect.option(lookupRows(settings.record, batch.records)))
      for (let i = 0; i < batch.records.length; i++) {
        if (!goOn()) {
          if (!settings.stopping()) yield* dropRevoked(batch.records.slice(i))
          break
        }
        yield* handleRecord(settings, state, batch.records[i]!, undefined, rows)
      }
    }
    yield* Partition.commit(settings.subscription, state)
  })

export const dropRevoked = (records: ReadonlyArray<ConsumerRecord>) =>
  Effect.andThen(
    Metric.update(Telemetry.consumerRevokedRecordsTotal, records.length),
    Effect.logDebug(
      `dropping ${records.length} record(s) of revoked partition ${records[0]?.topic}/${records[0]?.partition}`
    )
  )

/** The local outbox rows of `records`, in one read. */
export const lookupRows = (settings: RecordRunner.RecordSettings, records: ReadonlyArray<ConsumerRecord>) =>
  Effect.gen(function* () {
    const rows = new Map<string, OutboxMessage>()
    const ids = settings.lifecycle ? RecordRunner.localIds(records) : []
    if (ids.length === 0) return rows
    for (const row of yield* settings.store.list({ ids: [...ids], limit: ids.length })) rows.set(row.id, row)
    return rows
  })

/**
 * Per-batch mode: rounds over the rest of the batch until it is done. Each round prepares records
 * up to the first that cannot join (parked ones wait as usual), runs them through
 * `Inbox.processBatch` stopping at the first failing work, finishes the committed ones, and hands
 * the failing record to the record runner with its try as attempt 1; the next round starts after
 * it (so a dead letter parks the rest of its key before they are looked at).
 */
export const processInRounds = (
  settings: BatchSettings,
  state: PartitionState,
  records: ReadonlyArray<ConsumerRecord>,
  goOn: () => boolean
) =>
  Effect.gen(function* () {
    let i = 0
    while (i < records.length && goOn()) i += yield* round(settings, state, records.slice(i))
    if (i < records.length && !settings.stopping()) yield* dropRevoked(records.slice(i))
  })

/** A record's place in a round. */
type Step =
  | { readonly _tag: "parked"; readonly record: ConsumerRecord }
  | { readonly _tag: "skip"; readonly record: ConsumerRecord }
  | {
      readonly _tag: "run"
      readonly record: ConsumerRecord
      readonly key: ProcessedKey
      readonly work: Effect.Effect<unknown, unknown>
      readonly trackedId: EventId | null
    }

interface Plan {
  readonly steps: ReadonlyArray<Step>
  /** The record whose preparation failed, ending the plan: its try is attempt 1. */
  readonly unprepared: { readonly record: ConsumerRecord; readonly first: RecordRunner.FirstTry } | undefined
}

/** One round; answers how many records of `rest` it finished or parked. */
const round = (settings: BatchSettings, state: PartitionState, rest: ReadonlyArray<ConsumerRecord>) =>
  Effect.gen(function* () {
    const rows = yield* Effect.exit(lookupRows(settings.record, rest))
    if (Exit.isFailure(rows)) {
      // The lookup failed: this record the per-record way (which retries its own lookup).
      yield* handleRecord(settings, state, rest[0]!)
      return 1
    }
    const plan = yield* planRound(settings, state, rest, rows.value)
    const runs = plan.steps.filter((step) => step._tag === "run")
    const results = runs.length === 0 ? [] : yield* settings.record.inbox.processBatch(runs, { stopAtFailure: true })
    return yield* applyRound(settings, state, plan, results)
  })

/** Every record of `rest` up to the first whose preparation fails. */
const planRound = (
  settings: BatchSettings,
  state: PartitionState,
  rest: ReadonlyArray<ConsumerRecord>,
  rows: ReadonlyMap<string, OutboxMessage>
): Effect.Effect<Plan> =>
  Effect.gen(function* () {
    const lookup: RecordRunner.Lookup = (id) => Effect.succeed(Option.fromNullishOr(rows.get(id)))
    const steps: Array<Step> = []
    for (const record of rest) {
      if (settings.parking && Partition.isParked(state, record)) {
        steps.push({ _tag: "parked", record })
        continue
      }
      const prepared = yield* Effect.exit(RecordRunner.prepare(settings.record, record, 1, lookup))
      if (Exit.isFailure(prepared)) {
        return { steps, unprepared: { record, first: { exit: Exit.failCause(prepared.cause) } } }
      }
      steps.push(prepared.value._tag === "skip" ? { _tag: "skip", record } : { ...prepared.value, record })
    }
    return { steps, unprepared: undefined }
  })

/** Applies a round's results in order, up to the first failing work; answers how far it got. */
const applyRound = (
  settings: BatchSettings,
  state: PartitionState,
  plan: Plan,
  results: ReadonlyArray<Exit.Exit<Inbox.Outcome, unknown>>
) =>
  Effect.gen(function* () {
    let ran = 0
    let applied = 0
    for (const step of plan.steps) {
      applied++
      if (step._tag === "parked") yield* handleRecord(settings, state, step.record)
      else if (step._tag === "skip") {
        yield* RecordRunner.countRecord("skipped")
        Partition.markDone(state, step.record)
      } else {
        const exit = results[ran++]!
        const done = Exit.isSuccess(exit) ? exit.value : undefined
        if (done === "expired") {
          // Older than the window (the batch stopped there): the per-record path applies `onExpired`.
          yield* handleRecord(settings, state, step.record)
          return applied
        }
        const outcome: Exit.Exit<RecordRunner.RecordResult, RecordRunner.TryFailure> =
          done !== undefined
            ? yield* Effect.exit(RecordRunner.finish(settings.record, done, step.trackedId))
            : Exit.mapError(
                exit as Exit.Exit<never, unknown>,
                (error) => new RecordRunner.TryFailure(error, step.trackedId)
              )
        if (Exit.isSuccess(outcome)) {
          yield* RecordRunner.countRecord(outcome.value)
          Partition.markDone(state, step.record)
        } else {
          // Its try failed: attempt 1 of the per-record path (retries, dead letter, parking).
          yield* handleRecord(settings, state, step.record, { exit: outcome })
        }
        // Nothing after a failing work ran: the next round plans it again.
        if (Exit.isFailure(exit)) return applied
      }
    }
    if (plan.unprepared !== undefined) {
      yield* handleRecord(settings, state, plan.unprepared.record, plan.unprepared.first)
      applied++
    }
    return applied
  })
