/**
 * One record, from delivery to its end: processed, skipped (finished outbox work), or
 * dead-lettered. A try starts the row's lifecycle, decodes, runs the handler inside the inbox
 * transaction and finishes the lifecycle; failures are the infrastructure's (waited for without
 * limit) or the record's own (retried within `maxAttempts`, then dead-lettered).
 */
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import type { ConsumerRecord } from "../../ConsumerSource.ts"
import * as DeadLetter from "../../DeadLetter.ts"
import type { PayloadDecodeError, StoreError } from "../../Errors.ts"
import * as Inbox from "../../Inbox.ts"
import type { InboxStore, ProcessedKey } from "../../InboxStore.ts"
import * as Lifecycle from "../../Lifecycle.ts"
import { EVENT_ID_HEADER, type EventId, isEventId, type OutboxMessage } from "../../OutboxMessage.ts"
import { OutboxStore } from "../../OutboxStore.ts"
import type { Publisher } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import * as Transition from "../../Transition.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"
import type { Classifier, InfrastructureTest } from "./classify.ts"
import * as Expired from "./expired.ts"

/** What the record runner needs, fixed when the consumer starts. */
export interface RecordSettings {
  readonly groupId: string
  readonly identity: Inbox.IdentityStrategy
  readonly onExpired: Inbox.ExpiredPolicy
  readonly lifecycle: boolean
  readonly maxAttempts: number
  readonly classify: Classifier
  readonly isInfrastructure: InfrastructureTest
  readonly retrySchedule: Schedule.Schedule<unknown, unknown>
  readonly infrastructureRetry: Schedule.Schedule<unknown, unknown>
  readonly deadLetterTopic: (topic: string) => string
  /** The payload, decoded with the consumer's schema. */
  readonly decode: (record: ConsumerRecord) => Effect.Effect<unknown, PayloadDecodeError | StoreError>
  /** The handler's work for a decoded record (defects as `HandlerDefectError`, spans, services). */
  readonly handle: (record: ConsumerRecord, payload: unknown, attempt: number) => Effect.Effect<unknown, unknown>
  readonly inbox: Inbox.Inbox["Service"]
  readonly inboxStore: Option.Option<InboxStore["Service"]>
  readonly store: OutboxStore["Service"]
  readonly publisher: Publisher["Service"]
}

/** How a record that did not fail ended. */
export type RecordResult = "processed" | "already_processed" | "skipped"

/** Reads a record's local outbox row. */
export type Lookup = (id: EventId) => Effect.Effect<Option.Option<OutboxMessage>, StoreError>

/** A failed try, with the row it had put under processing (if any) so a dead letter can end it. */
export class TryFailure {
  readonly error: unknown
  readonly trackedId: EventId | null
  constructor(error: unknown, trackedId: EventId | null) {
    this.error = error
    this.trackedId = trackedId
  }
}

/** A record ready for the inbox, or one to skip (finished outbox work). */
export type Prepared =
  | { readonly _tag: "skip" }
  | {
      readonly _tag: "run"
      readonly key: ProcessedKey
      readonly work: Effect.Effect<unknown, unknown>
      readonly trackedId: EventId | null
    }

const skip: Prepared = { _tag: "skip" }

export const countRecord = (result: RecordResult | "dead_lettered") =>
  Metric.update(Metric.withAttributes(Telemetry.consumerRecordsTotal, { result }), 1)

/** The record's `event-id` header, when it has a non-empty one. */
export const eventIdOf = (record: ConsumerRecord): string | null => {
  const raw = record.headers[EVENT_ID_HEADER]
  return raw !== undefined && raw !== "" ? raw : null
}

/** The local event ids of `records` (headers that are event ids). */
export const localIds = (records: ReadonlyArray<ConsumerRecord>): ReadonlyArray<EventId> => {
  const ids = new Set<EventId>()
  for (const record of records) {
    const id = record.headers[EVENT_ID_HEADER]
    if (id !== undefined && isEventId(id)) ids.add(id)
  }
  return [...ids]
}

/**
 * The lifecycle before the work: skip finished work, or move the row under processing. Answers
 * the row now under this consumer's processing (`null` when none: no local row, lifecycle off).
 */
const startLifecycle = (
  settings: RecordSettings,
  record: ConsumerRecord,
  lookup: Lookup
): Effect.Effect<"skip" | EventId | null, StoreError, OutboxStore> =>
  Effect.gen(function* () {
    const eventId = eventIdOf(record)
    if (!settings.lifecycle || eventId === null || !isEventId(eventId)) return null
    const row = yield* lookup(eventId)
    if (Option.isNone(row)) return null
    const isReplay = record.headers[DeadLetter.headers.replayAttempt] !== undefined
    // What to do with the row's status is Lifecycle's rule: finished work is skipped (only the
    // one group that drives the lifecycle writes PUSHED_FAILURE); a FAILURE row whose record is
    // here after all (a timed-out last attempt landed) is processed and reported.
    const action = Lifecycle.consumerAction(row.value.status, isReplay)
    if (action === "skip") return "skip"
    if (action === "processFailed") yield* reportFailureRowDelivered(settings, record, eventId)
    if (action !== "start") return null
    const started = yield* Transition.startProcessing(eventId)
    if (started.outcome === "already_advanced") {
      return started.current !== undefined && Lifecycle.consumerAction(started.current, isReplay) === "skip"
        ? "skip"
        : null
    }
    return started.outcome === "applied" || started.current === "UNDER_PROCESSING" ? eventId : null
  })

const reportFailureRowDelivered = (settings: RecordSettings, record: ConsumerRecord, eventId: string) =>
  Effect.all([
    Metric.update(Metric.withAttributes(Telemetry.consumerAnomaliesTotal, { kind: "failure_row_delivered" }), 1),
    Effect.logWarning(
      `${record.topic}/${record.partition}@${record.offset}: outbox row ${eventId} is FAILURE but its record ` +
        `was delivered; processing it (the row stays FAILURE; do not requeue it, that would publish it again)`
    ).pipe(Effect.annotateLogs({ eventId, consumer: settings.groupId }))
  ])

/** A try up to the inbox: the lifecycle start, the decoding, the work. */
export const prepare = (
  settings: RecordSettings,
  record: ConsumerRecord,
  attempt: number,
  lookup: Lookup
): Effect.Effect<Prepared, TryFailure> =>
  Effect.gen(function* () {
    const started = yield* startLifecycle(settings, record, lookup).pipe(
      Effect.mapError((error) => new TryFailure(error, null))
    )
    if (started === "skip") return skip
    const payload = yield* settings.decode(record).pipe(Effect.mapError((error) => new TryFailure(error, started)))
    return {
      _tag: "run",
      key: Inbox.keyOf(settings.groupId, record, settings.identity),
      work: settings.handle(record, payload, attempt),
      trackedId: started
    } satisfies Prepared
  }).pipe(Effect.provideService(OutboxStore, settings.store))

/** After the inbox: `SUCCESS`, or the reconciliation of a missing one. */
export const finish = (
  settings: RecordSettings,
  outcome: Exclude<Inbox.Outcome, "expired">,
  trackedId: EventId | null
): Effect.Effect<RecordResult, TryFailure> =>
  Effect.gen(function* () {
    if (trackedId === null) return outcome
    const finished = yield* Transition.finishProcessing(trackedId, "SUCCESS")
    if (outcome === "already_processed" && finished.outcome === "applied") {
      // The work committed earlier but its SUCCESS never did (a crash in between): repair the
      // lifecycle, do not repeat the work.
      yield* Metric.update(Telemetry.consumerReconciledTotal, 1)
      yield* Effect.logInfo(`reconciled ${trackedId}: already processed, SUCCESS was missing`).pipe(
        Effect.annotateLogs({ eventId: trackedId, consumer: settings.groupId })
      )
    }
    return outcome
  }).pipe(
    Effect.mapError((error) => new TryFailure(error, trackedId)),
    Effect.provideService(OutboxStore, settings.store)
  )

/** One try of one record in its own transaction. */
const attemptOnce = (
  settings: RecordSettings,
  record: ConsumerRecord,
  attempt: number,
  lookup: Lookup
): Effect.Effect<RecordResult, TryFailure> =>
  Effect.gen(function* () {
    const prepared = yield* prepare(settings, record, attempt, lookup)
    if (prepared._tag === "skip") return "skipped"
    const outcome = yield* settings.inbox.processOnce(prepared.key, prepared.work).pipe(
      Effect.flatMap((outcome) =>
        outcome === "expired" ? Expired.resolve(settings, record, prepared.key, prepared.work) : Effect.succeed(outcome)
      ),
      Effect.mapError((error) => new TryFailure(error, prepared.trackedId))
    )
    return yield* finish(settings, outcome, prepared.trackedId)
  })

/** A try already made elsewhere (a per-batch round): attempt 1, not repeated. */
export interface FirstTry {
  readonly exit: Exit.Exit<RecordResult, TryFailure>
}

/**
 * Runs one record to its end: processed, skipped, or dead-lettered. `first` is a try already made
 * (in a batch); `rows` the local outbox rows read for the whole batch, used by attempt 1 (the
 * transitions are compare-and-set, so a row that moved since is seen then); retries read the row
 * again.
 */
export const runRecord = (
  settings: RecordSettings,
  record: ConsumerRecord,
  first?: FirstTry,
  rows?: ReadonlyMap<string, OutboxMessage>
): Effect.Effect<RecordResult | "dead_lettered", DeadLetter.DeadLetterPublishError> =>
  Effect.gen(function* () {
    const { attempts, result } = yield* tryWithRetries(settings, record, first, rows)
    if (Result.isSuccess(result)) {
      yield* countRecord(result.success)
      return result.success
    }
    const failure = result.failure
    if (yield* workCommitted(settings, record)) {
      // Only the bookkeeping after the work kept failing: the record is processed, not poison.
      yield* Effect.logWarning(
        `${record.topic}/${record.partition}@${record.offset} was processed but its bookkeeping failed ` +
          `${attempts} time(s): ${DeadLetter.errorMessage(failure.error)}; its outbox row is reconciled on redelivery`
      )
      yield* countRecord("processed")
      return "processed" as const
    }
    yield* deadLetter(settings, record, failure, attempts)
    yield* countRecord("dead_lettered")
    return "dead_lettered" as const
  }).pipe(
    runningSpan(Telemetry.spans.consumerRecord, {
      attributes: {
        "outbox.topic": record.topic,
        "outbox.partition": record.partition,
        "outbox.offset": record.offset
      }
    })
  )

interface Tried {
  readonly result: Result.Result<RecordResult, TryFailure>
  /** The record's own tries (infrastructure retries not counted). */
  readonly attempts: number
}

/**
 * Tries until success, a permanent failure or the attempt budget. Infrastructure failures are
 * retried in the inner loop, without limit, and never count as an attempt.
 */
const tryWithRetries = (
  settings: RecordSettings,
  record: ConsumerRecord,
  first: FirstTry | undefined,
  rows: ReadonlyMap<string, OutboxMessage> | undefined
): Effect.Effect<Tried> => {
  const batchLookup: Lookup | undefined =
    rows === undefined ? undefined : (id) => Effect.succeed(Option.fromNullishOr(rows.get(id)))
  const isInfrastructure = (failure: TryFailure) => settings.isInfrastructure(failure.error)
  const isTransient = (failure: TryFailure) => settings.classify(failure.error) === "transient"
  let attempts = 1
  let tries = 0
  let replay = first?.exit
  const once = Effect.suspend(() => {
    tries++
    if (replay !== undefined) {
      const exit = replay
      replay = undefined
      return exit
    }
    return attemptOnce(settings, record, attempts, tries === 1 && batchLookup ? batchLookup : settings.store.get)
  })
  return once.pipe(
    Effect.tapError((failure) =>
      isInfrastructure(failure) ? reportInfrastructureFailure(settings, record, failure.error) : Effect.void
    ),
    Effect.retry({ schedule: settings.infrastructureRetry, while: isInfrastructure }),
    Effect.tapError((failure) =>
      attempts < settings.maxAttempts && isTransient(failure)
        ? Effect.andThen(
            Metric.update(Telemetry.consumerRetriesTotal, 1),
            Effect.sync(() => attempts++)
          )
        : Effect.void
    ),
    Effect.retry({ schedule: settings.retrySchedule, while: isTransient, times: settings.maxAttempts - 1 }),
    Effect.result,
    Effect.map((result): Tried => ({ result, attempts }))
  )
}

const reportInfrastructureFailure = (settings: RecordSettings, record: ConsumerRecord, error: unknown) =>
  Effect.all([
    Metric.update(Telemetry.consumerInfrastructureRetriesTotal, 1),
    Effect.logWarning(
      `${record.topic}/${record.partition}@${record.offset} waits for the infrastructure (not counted as an ` +
        `attempt, retried without limit): ${DeadLetter.errorMessage(error)}`
    ).pipe(Effect.annotateLogs({ consumer: settings.groupId }))
  ])

/**
 * Did the record's work commit although its tries failed (the SUCCESS transition, a lost commit
 * acknowledgement)? Never answers "no" because the database is down: it waits for it.
 */
const workCommitted = (settings: RecordSettings, record: ConsumerRecord): Effect.Effect<boolean> =>
  Option.match(settings.inboxStore, {
    onNone: () => Effect.succeed(false),
    onSome: (store) =>
      store.exists(Inbox.keyOf(settings.groupId, record, settings.identity)).pipe(
        Effect.tapError((error) => reportInfrastructureFailure(settings, record, error)),
        Effect.retry({ schedule: settings.infrastructureRetry, while: settings.isInfrastructure }),
        Effect.orElseSucceed(() => false)
      )
  })

/** Publishes the record to its dead-letter topic and ends its row `PUSHED_FAILURE`. */
const deadLetter = (settings: RecordSettings, record: ConsumerRecord, failure: TryFailure, attempts: number) =>
  Effect.gen(function* () {
    const error = failure.error
    const classification = settings.classify(error)
    const target = settings.deadLetterTopic(record.topic)
    const request = yield* DeadLetter.toPublishRequest(record, target, {
      error,
      attempts,
      classification,
      consumerGroup: settings.groupId
    })
    yield* settings.publisher.publish([request]).pipe(
      Effect.flatMap(([outcome]) => (outcome!._tag === "Success" ? Effect.void : Effect.fail(outcome!.failure))),
      // Losing the record is worse than waiting.
      Effect.retry({ schedule: settings.infrastructureRetry, while: (e) => e.kind !== "permanent" }),
      Effect.mapError(
        (e) =>
          new DeadLetter.DeadLetterPublishError({
            deadLetterTopic: target,
            topic: record.topic,
            partition: record.partition,
            offset: record.offset,
            reason: e.message
          })
      )
    )
    const errorClass = DeadLetter.errorClass(error)
    yield* Metric.update(Metric.withAttributes(Telemetry.deadLettered, { topic: record.topic, error: errorClass }), 1)
    yield* Effect.logWarning(
      `dead-lettered ${record.topic}/${record.partition}@${record.offset} to ${target} after ${attempts} ` +
        `attempt(s) (${classification}): ${DeadLetter.errorMessage(error)}`
    ).pipe(
      Effect.annotateLogs({
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        deadLetterTopic: target,
        errorClass,
        attempts
      })
    )
    if (failure.trackedId !== null) yield* endDeadLettered(settings, failure.trackedId, target, error)
  })

/** The record is on the DLT already; its row waits for the database like any record. */
const endDeadLettered = (settings: RecordSettings, id: EventId, target: string, error: unknown) =>
  Transition.finishProcessing(id, "PUSHED_FAILURE", {
    reason: `dead-lettered to ${target}: ${DeadLetter.errorMessage(error)}`
  }).pipe(
    Effect.retry({ schedule: settings.infrastructureRetry, while: settings.isInfrastructure }),
    Effect.catch((e) => Effect.logError(`could not mark ${id} PUSHED_FAILURE after dead-lettering: ${e.message}`)),
    Effect.provideService(OutboxStore, settings.store)
  )
