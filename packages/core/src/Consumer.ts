/**
 * The idempotent consumer runner (R4, R5, R2.5): runs a handler over a `ConsumerSource`.
 *
 * For each record, per partition in offset order:
 * 1. a record of a parked key waits behind its dead-lettered predecessor (optional parking);
 * 2. a locally known outbox row that is already terminal is skipped (R4.4);
 * 3. a known row still `DISPATCHING` / `PUBLISHED` moves to `UNDER_PROCESSING` (R2.5);
 * 4. the payload is decoded (Schema) and the handler runs inside `Inbox.processOnce` — one
 *    transaction with the dedup record (R4.1); the handler gets the event id as its idempotency
 *    key for outside effects (R4.6);
 * 5. the row moves to `SUCCESS`; a record found `already_processed` whose row never reached
 *    `SUCCESS` is reconciled without running the handler again (R4.4);
 * 6. transient failures retry under a `Schedule`; permanent failures and exhausted retries go to
 *    the dead-letter topic and the row to `PUSHED_FAILURE` (R5.1, R5.2); the partition moves on.
 *
 * Offsets are committed after each batch, only up to the highest offset below which every record
 * finished (committed its transaction, was skipped, or was dead-lettered): a crash anywhere
 * redelivers the unfinished records and the inbox deduplicates them (R4.5).
 *
 * With `transaction: "per-batch"` the records of a fetched batch share one transaction
 * (`Inbox.processBatch`); the first record that fails commits the ones before it and goes
 * through the per-record path (retries, dead letter, parking) before the rest continue, so the
 * order and the per-record guarantees are the same.
 *
 * Every status change goes through `Transition` (R2.7).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { type ConsumerBatch, type ConsumerRecord, ConsumerSource, type Subscription } from "./ConsumerSource.ts"
import * as DeadLetter from "./DeadLetter.ts"
import type { ConsumerSourceError, OutboxStoreError } from "./Errors.ts"
import * as Inbox from "./Inbox.ts"
import { InboxStore, type ProcessedKey } from "./InboxStore.ts"
import { EVENT_ID_HEADER, EventId, type OutboxMessage } from "./OutboxMessage.ts"
import { OutboxStore } from "./OutboxStore.ts"
import { Publisher } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import * as Transition from "./Transition.ts"

// ---------------------------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------------------------

/**
 * The payload does not decode with the consumer's schema. Permanent by default: the same bytes
 * will never decode, so the record goes to the dead-letter topic at once.
 *
 * @since 0.1.0
 * @category errors
 */
export class PayloadDecodeError extends Schema.TaggedError<PayloadDecodeError>()("PayloadDecodeError", {
  topic: Schema.String,
  partition: Schema.Int,
  offset: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `payload of ${this.topic}/${this.partition}@${this.offset} does not decode: ${this.reason}`
  }
}

/**
 * The handler died (threw, or failed with a defect). Classified like any other error — transient
 * by default, so it is retried and then dead-lettered — instead of killing the consumer.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandlerDefectError extends Schema.TaggedError<HandlerDefectError>()("HandlerDefectError", {
  reason: Schema.String,
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message() {
    return `handler died: ${this.reason}`
  }
}

// ---------------------------------------------------------------------------------------------
// the handler's view
// ---------------------------------------------------------------------------------------------

/**
 * What the handler receives.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message<A> {
  readonly payload: A
  readonly record: ConsumerRecord
  readonly key: string | null
  /** The record's `event-id` header, when it has one. */
  readonly eventId: string | null
  /**
   * The key to hand to effects outside the database (payment API, e-mail) so they deduplicate
   * too (R4.6): the event id, or the record's offset identity when it has none.
   */
  readonly idempotencyKey: string
  /** 1 for the first try, 2 for the first retry, … */
  readonly attempt: number
}

/**
 * @since 0.1.0
 * @category classification
 */
export type Classification = "transient" | "permanent"

/**
 * Decides whether a failure is worth retrying (R5.2).
 *
 * @since 0.1.0
 * @category classification
 */
export type Classifier = (error: unknown) => Classification

/**
 * The default classifier:
 * - `PayloadDecodeError`, `SchemaError`, `OutboxValidationError`: permanent (the same input fails
 *   the same way);
 * - any error with a boolean `retriable` field (`OutboxStoreError`, publish errors, …): by that
 *   field;
 * - anything else, `HandlerDefectError` included: transient — retried a bounded number of times,
 *   then dead-lettered, so an unknown error costs a few retries, never a blocked partition.
 *
 * @since 0.1.0
 * @category classification
 */
export const defaultClassifier: Classifier = (error) => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { readonly _tag?: unknown })._tag
    if (tag === "PayloadDecodeError" || tag === "SchemaError" || tag === "OutboxValidationError") return "permanent"
    const retriable = (error as { readonly retriable?: unknown }).retriable
    if (typeof retriable === "boolean") return retriable ? "transient" : "permanent"
  }
  return "transient"
}

/**
 * Decides whether a failure is the infrastructure's, not the record's (H2): such a failure pauses
 * the partition and is retried without limit; it never counts toward `maxAttempts` and never
 * dead-letters.
 *
 * @since 0.1.0
 * @category classification
 */
export type InfrastructureTest = (error: unknown) => boolean

/**
 * The default infrastructure test: a retriable `OutboxStoreError` (the lookup, a transition, the
 * inbox's BEGIN/INSERT/COMMIT, a lost connection) or a retriable `SqlError` (the handler's own SQL
 * on a database that is down or failing over). A handler waiting on the same database is not
 * poison: the record waits with it.
 *
 * @since 0.1.0
 * @category classification
 */
export const defaultIsInfrastructure: InfrastructureTest = (error) => {
  if (typeof error !== "object" || error === null) return false
  const tag = (error as { readonly _tag?: unknown })._tag
  if (tag === "OutboxStoreError") return (error as { readonly retriable?: unknown }).retriable === true
  if (tag !== "SqlError") return false
  const sql = error as {
    readonly isRetryable?: unknown
    readonly reason?: { readonly _tag?: unknown; readonly cause?: { readonly code?: unknown } }
  }
  const code = sql.reason?.cause?.code
  return (
    sql.isRetryable === true ||
    sql.reason?._tag === "ConnectionError" ||
    (typeof code === "string" && isInfrastructureState(code))
  )
}

/**
 * SQLSTATEs of the database rather than the statement (standard SQL classes): connection (08),
 * insufficient resources (53), operator intervention / shutting down or starting up (57P01-3),
 * serialization failure and deadlock (40001, 40P01).
 */
const isInfrastructureState = (code: string): boolean =>
  code.startsWith("08") ||
  code.startsWith("53") ||
  code === "57P01" ||
  code === "57P02" ||
  code === "57P03" ||
  code === "40001" ||
  code === "40P01"

// ---------------------------------------------------------------------------------------------
// options
// ---------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<S extends Schema.Top, E, R> {
  /** The consumer group; also the inbox's consumer name. */
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  /** The payload's schema; payloads are JSON. */
  readonly schema: S
  readonly handler: (message: Message<S["Type"]>) => Effect.Effect<unknown, E, R>
  /** Dedup identity (default `"event-id"`, falling back to the offset identity). */
  readonly identity?: Inbox.IdentityStrategy
  /**
   * Where partitions WITHOUT a committed offset start (a new group, a partition added to a grown
   * topic): `true` (default) at their earliest record; `false` at their end — which may skip
   * records on new partitions (those written before the group noticed the partition).
   */
  readonly fromBeginning?: boolean
  /** Partitions processed at the same time (default 8). Order within a partition is kept. */
  readonly concurrency?: number
  /** Tries per record before it is dead-lettered, the first included (default 5). */
  readonly maxAttempts?: number
  /** Delays between tries (default exponential from 100 ms, jittered, capped at 10 s). */
  readonly retrySchedule?: Schedule.Schedule<unknown, unknown>
  /** Transient vs permanent (default {@link defaultClassifier}). */
  readonly classify?: Classifier
  /**
   * Which failures are the infrastructure's (default {@link defaultIsInfrastructure}): retried with
   * `infrastructureRetrySchedule` without limit, never counted as an attempt, never dead-lettered.
   */
  readonly isInfrastructure?: InfrastructureTest
  /** Delays between retries of infrastructure failures (default exponential from 200 ms, jittered, capped at 30 s; forever). */
  readonly infrastructureRetrySchedule?: Schedule.Schedule<unknown, unknown>
  /** The dead-letter topic of a topic (default `<topic>.DLT`). */
  readonly deadLetterTopic?: (topic: string) => string
  /**
   * Per-key parking: once a record of key K is dead-lettered, later records of K on that
   * partition wait (in order) until `release` while other keys flow. Default off.
   */
  readonly parking?: boolean
  /**
   * Drive the outbox lifecycle of locally known events (default on). Turn it off for every
   * consumer group but one when several groups consume the same events from one database.
   */
  readonly lifecycle?: boolean
  /**
   * `"per-record"` (default): each record's work commits in its own transaction
   * (`Inbox.processOnce`). `"per-batch"`: the records of a fetched batch commit in one transaction
   * (`Inbox.processBatch`: one inbox statement, one outbox-row lookup, one commit per batch); the
   * first record that fails (its work, its decoding, its lookup) commits the records before it,
   * is retried / dead-lettered on its own as in `"per-record"`, then the rest of the batch goes on.
   * Same order and guarantees, far fewer round trips; the work of records before a failure runs
   * again in the new transaction (it was rolled back), as a retry would.
   */
  readonly transaction?: "per-record" | "per-batch"
  /** Batches buffered per partition before the source is back-pressured (default 2). */
  readonly bufferedBatches?: number
  /** How long shutdown waits for records in flight before interrupting them (default 30 s). */
  readonly shutdownTimeout?: Duration.Input
}

/**
 * A parked key: records waiting behind a dead-lettered predecessor of the same key.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParkedKey {
  readonly topic: string
  readonly partition: number
  readonly key: string
  readonly offsets: ReadonlyArray<string>
}

/**
 * Failures that stop the consumer. Handler failures never do: they are dead-lettered.
 *
 * @since 0.1.0
 * @category errors
 */
export type ConsumerError = ConsumerSourceError | DeadLetter.DeadLetterPublishError

/**
 * A running consumer.
 *
 * @since 0.1.0
 * @category models
 */
export interface Consumer {
  /** Keys currently parked (empty unless `parking` is on). */
  readonly parked: Effect.Effect<ReadonlyArray<ParkedKey>>
  /**
   * Releases a parked key: its records are processed now, in their original order (a record
   * that fails again is dead-lettered and parks the rest again). Returns how many were processed.
   */
  readonly release: (target: {
    readonly topic: string
    readonly partition: number
    readonly key: string
  }) => Effect.Effect<number, ConsumerError>
  /** Fails when the consumer stops on an error; never succeeds. */
  readonly await: Effect.Effect<never, ConsumerError>
}

/**
 * What the consumer needs besides the handler's own requirements.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = ConsumerSource | Inbox.Inbox | OutboxStore | Publisher

// ---------------------------------------------------------------------------------------------
// metrics
// ---------------------------------------------------------------------------------------------

/**
 * Records finished by the consumer, with attribute `result`: `processed`, `already_processed`,
 * `skipped` (terminal outbox row), `dead_lettered`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const recordsTotal = Metric.counter("outbox_consumer_records_total", {
  description: "Records finished by the consumer, by result",
  incremental: true
})

/**
 * Missing `SUCCESS` transitions repaired without running the handler again (R4.4).
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciledTotal = Metric.counter("outbox_consumer_reconciled_total", {
  description: "Already-processed records whose missing SUCCESS transition was reconciled",
  incremental: true
})

/**
 * Handler tries that failed and will be retried.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retriesTotal = Metric.counter("outbox_consumer_retries_total", {
  description: "Failed handler tries that were retried",
  incremental: true
})

/**
 * Tries that failed on the infrastructure (database down, transaction lost) and are retried
 * without limit, outside the attempt budget (H2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const infrastructureRetriesTotal = Metric.counter("outbox_consumer_infrastructure_retries_total", {
  description: "Record tries that failed on the infrastructure and were retried outside the attempt budget",
  incremental: true
})

/**
 * Delivered records whose local outbox row was in a state that should not be delivered, with
 * attribute `kind` (`failure_row_delivered`: the relay gave the row up as `FAILURE`, yet the
 * record reached Kafka — processed anyway, C2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const anomaliesTotal = Metric.counter("outbox_consumer_anomalies_total", {
  description: "Delivered records whose outbox row said they should not have been delivered",
  incremental: true
})

const countRecord = (result: "processed" | "already_processed" | "skipped" | "dead_lettered") =>
  Metric.update(Metric.withAttributes(recordsTotal, { result }), 1)

// ---------------------------------------------------------------------------------------------
// the runner
// ---------------------------------------------------------------------------------------------

/**
 * The default delays between tries.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRetrySchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("100 millis").pipe(
  Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.seconds(10)))),
  Schedule.jittered
)

/**
 * The default delays between retries of infrastructure failures: exponential from 200 ms, capped
 * at 30 s, jittered, without end. Also used for the DLT publish (losing the record is worse than
 * waiting) and, a few times, for offset commits (a lost commit only causes redelivery).
 *
 * @since 0.1.0
 * @category constants
 */
export const infrastructureRetrySchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis").pipe(
  Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.seconds(30)))),
  Schedule.jittered
)
const infrastructureSchedule = infrastructureRetrySchedule

const isEventId = Schema.is(EventId)

type RecordResult = "processed" | "already_processed" | "skipped"

/** A record ready for the inbox, or one to skip (terminal outbox work, R4.4). */
type Prepared =
  | { readonly _tag: "skip" }
  | { readonly _tag: "run"; readonly key: ProcessedKey; readonly work: Effect.Effect<unknown, unknown> }

const skip: Prepared = { _tag: "skip" }

/** A record's place in a per-batch round. */
type Step =
  | { readonly _tag: "parked"; readonly record: ConsumerRecord }
  | { readonly _tag: "skip"; readonly record: ConsumerRecord }
  | {
      readonly _tag: "run"
      readonly record: ConsumerRecord
      readonly tracked: { id: EventId | null }
      readonly key: ProcessedKey
      readonly work: Effect.Effect<unknown, unknown>
    }

interface PartitionState {
  readonly topic: string
  readonly partition: number
  readonly queue: Queue.Queue<ConsumerBatch, Cause.Done>
  /** Serialises batch processing and `release` on this partition. */
  readonly lock: Semaphore.Semaphore
  /** Delivered offsets whose record has not finished (in flight or parked), ascending. */
  notDone: Array<bigint>
  maxDelivered: bigint
  lastCommitted: bigint
  readonly parked: Map<string, Array<ConsumerRecord>>
  fiber: Fiber.Fiber<void, ConsumerError> | undefined
}

/**
 * Starts a consumer in the current scope: joins the group, processes until the scope closes,
 * then shuts down gracefully (stops fetching, lets records in flight finish for up to
 * `shutdownTimeout`, commits what finished, leaves the group).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <S extends Schema.Top, E, R>(
  options: Options<S, E, R>
): Effect.Effect<Consumer, ConsumerSourceError, Scope.Scope | Requirements | R | S["DecodingServices"]> =>
  Effect.gen(function* () {
    const source = yield* ConsumerSource
    const inbox = yield* Inbox.Inbox
    // Optional: with it, a record whose work committed is never dead-lettered (see handleRecord).
    const inboxStore = yield* Effect.serviceOption(InboxStore)
    const store = yield* OutboxStore
    const publisher = yield* Publisher
    const scope = yield* Effect.scope
    const context = yield* Effect.context<R | S["DecodingServices"]>()

    const classify = options.classify ?? defaultClassifier
    const isInfrastructure = options.isInfrastructure ?? defaultIsInfrastructure
    const infrastructureRetry = options.infrastructureRetrySchedule ?? infrastructureRetrySchedule
    const maxAttempts = Math.max(1, options.maxAttempts ?? 5)
    const identity = options.identity ?? "event-id"
    const lifecycle = options.lifecycle ?? true
    const parking = options.parking ?? false
    const dltOf = options.deadLetterTopic ?? DeadLetter.defaultTopic
    const retryPolicy = options.retrySchedule ?? defaultRetrySchedule
    const decode = Schema.decodeUnknownEffect(Schema.fromJsonString(options.schema))
    const perBatch = options.transaction === "per-batch"

    const subscription: Subscription = yield* source.subscribe({
      groupId: options.groupId,
      topics: options.topics,
      fromBeginning: options.fromBeginning ?? true
    })

    const failed = yield* Deferred.make<never, ConsumerError>()
    const permits = yield* Semaphore.make(Math.max(1, options.concurrency ?? 8))
    const partitions = new Map<string, PartitionState>()
    let stopping = false
    // Workers live in their own scope so shutdown decides when they are interrupted.
    const workerScope = yield* Scope.fork(scope)

    // -- one record ------------------------------------------------------------------------------

    const provideUser = <A, E2>(effect: Effect.Effect<A, E2, R | S["DecodingServices"]>) =>
      Effect.provideContext(effect, context)

    /**
     * A try up to the inbox: skip terminal work, start the lifecycle, decode, build the work.
     * `tracked.id` is set once the row is known to be under this consumer's processing.
     */
    const prepare = (
      record: ConsumerRecord,
      attempt: number,
      tracked: { id: EventId | null },
      lookup: (id: EventId) => Effect.Effect<Option.Option<OutboxMessage>, OutboxStoreError>
    ): Effect.Effect<Prepared, unknown> =>
      Effect.gen(function* () {
        const rawId = record.headers[EVENT_ID_HEADER]
        const eventId = rawId !== undefined && rawId !== "" ? rawId : null
        const isReplay = record.headers[DeadLetter.headers.replayAttempt] !== undefined
        tracked.id = null
        if (lifecycle && eventId !== null && isEventId(eventId)) {
          const row = yield* lookup(eventId)
          if (Option.isSome(row)) {
            const status = row.value.status
            // Finished work (R4.4): SUCCESS, or this group's own dead letter (only the one group
            // that drives the lifecycle writes PUSHED_FAILURE). A replayed dead letter is processed
            // again, but its terminal row is not moved (terminal means terminal, R2.4).
            if (status === "SUCCESS") return skip
            if (status === "PUSHED_FAILURE" && !isReplay) return skip
            // FAILURE does not prove the record never reached Kafka (a timed-out last attempt may
            // have landed, C2): here it is, so it is processed; the row stays terminal.
            if (status === "FAILURE" && !isReplay) yield* reportFailureRowDelivered(record, eventId)
            if (status === "DISPATCHING" || status === "PUBLISHED" || status === "UNDER_PROCESSING") {
              const started = yield* Transition.startProcessing(eventId)
              if (started.outcome === "already_advanced") {
                if (started.current === "SUCCESS" || !isReplay) return skip
              } else if (started.outcome === "applied" || started.current === "UNDER_PROCESSING") {
                tracked.id = eventId
              }
            }
          }
        }
        const payload = yield* decode(new TextDecoder().decode(record.value)).pipe(
          Effect.mapError(
            (error) =>
              new PayloadDecodeError({
                topic: record.topic,
                partition: record.partition,
                offset: record.offset,
                reason: error.message
              })
          ),
          provideUser
        )
        const message: Message<S["Type"]> = {
          payload,
          record,
          key: record.key,
          eventId,
          idempotencyKey: eventId ?? Inbox.offsetIdentity(record),
          attempt
        }
        const work = provideUser(options.handler(message)).pipe(
          Effect.catchDefect((defect) =>
            Effect.fail(new HandlerDefectError({ reason: DeadLetter.errorMessage(defect), cause: defect }))
          ),
          Effect.withSpan("outbox.consumer.handler", {
            attributes: {
              "outbox.topic": record.topic,
              "outbox.partition": record.partition,
              "outbox.offset": record.offset
            }
          }),
          // Outermost, so the handler span itself is a child of the enqueueing span (R8.2) and
          // the handler's own spans are children of the handler span.
          Telemetry.withParentFromHeaders(record.headers)
        )
        return { _tag: "run", key: Inbox.keyOf(options.groupId, record, identity), work } satisfies Prepared
      }).pipe(Effect.provideService(OutboxStore, store))

    const reportFailureRowDelivered = (record: ConsumerRecord, eventId: string) =>
      Effect.all([
        Metric.update(Metric.withAttributes(anomaliesTotal, { kind: "failure_row_delivered" }), 1),
        Effect.logWarning(
          `${record.topic}/${record.partition}@${record.offset}: outbox row ${eventId} is FAILURE but its record ` +
            `was delivered; processing it (the row stays FAILURE; do not requeue it, that would publish it again)`
        ).pipe(Effect.annotateLogs({ eventId, consumer: options.groupId }))
      ])

    /** After the inbox: `SUCCESS`, or the reconciliation of a missing one (R4.4). */
    const finish = (outcome: Inbox.Outcome, tracked: { id: EventId | null }): Effect.Effect<RecordResult, unknown> =>
      Effect.gen(function* () {
        if (tracked.id !== null) {
          const finished = yield* Transition.finishProcessing(tracked.id, "SUCCESS")
          if (outcome === "already_processed" && finished.outcome === "applied") {
            // The work committed earlier but its SUCCESS never did (a crash in between): repair
            // the lifecycle, do not repeat the work (R4.4).
            yield* Metric.update(reconciledTotal, 1)
            yield* Effect.logInfo(`reconciled ${tracked.id}: already processed, SUCCESS was missing`).pipe(
              Effect.annotateLogs({ eventId: tracked.id, consumer: options.groupId })
            )
          }
        }
        return outcome
      }).pipe(Effect.provideService(OutboxStore, store))

    /** One try of one record in its own transaction. */
    const attemptOnce = (
      record: ConsumerRecord,
      attempt: number,
      tracked: { id: EventId | null },
      lookup: (id: EventId) => Effect.Effect<Option.Option<OutboxMessage>, OutboxStoreError> = store.get
    ): Effect.Effect<RecordResult, unknown> =>
      Effect.gen(function* () {
        const prepared = yield* prepare(record, attempt, tracked, lookup)
        if (prepared._tag === "skip") return "skipped"
        return yield* finish(yield* inbox.processOnce(prepared.key, prepared.work), tracked)
      })

    const reportInfrastructureFailure = (record: ConsumerRecord, error: unknown) =>
      Effect.all([
        Metric.update(infrastructureRetriesTotal, 1),
        Effect.logWarning(
          `${record.topic}/${record.partition}@${record.offset} waits for the infrastructure (not counted as an ` +
            `attempt, retried without limit): ${DeadLetter.errorMessage(error)}`
        ).pipe(Effect.annotateLogs({ consumer: options.groupId }))
      ])

    const deadLetter = (record: ConsumerRecord, error: unknown, attempts: number, trackedId: EventId | null) =>
      Effect.gen(function* () {
        const classification = classify(error)
        const target = dltOf(record.topic)
        const request = yield* DeadLetter.toPublishRequest(record, target, {
          error,
          attempts,
          classification,
          consumerGroup: options.groupId
        })
        const publishOnce = Effect.flatMap(publisher.publish([request]), ([outcome]) =>
          outcome!._tag === "Success" ? Effect.void : Effect.fail(outcome!.failure)
        )
        yield* publishOnce.pipe(
          Effect.retry({
            schedule: infrastructureSchedule,
            while: (e) => e._tag === "RetriablePublishError" || e._tag === "BrokerUnavailableError"
          }),
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
        yield* Metric.update(
          Metric.withAttributes(DeadLetter.deadLettered, { topic: record.topic, error: DeadLetter.errorClass(error) }),
          1
        )
        yield* Effect.logWarning(
          `dead-lettered ${record.topic}/${record.partition}@${record.offset} to ${target} after ${attempts} ` +
            `attempt(s) (${classification}): ${DeadLetter.errorMessage(error)}`
        ).pipe(
          Effect.annotateLogs({
            topic: record.topic,
            partition: record.partition,
            offset: record.offset,
            deadLetterTopic: target,
            errorClass: DeadLetter.errorClass(error),
            attempts
          })
        )
        if (trackedId !== null) {
          yield* Transition.finishProcessing(trackedId, "PUSHED_FAILURE", {
            reason: `dead-lettered to ${target}: ${DeadLetter.errorMessage(error)}`
          }).pipe(
            // The record is on the DLT already; the row waits for the database like any record.
            Effect.retry({ schedule: infrastructureRetry, while: isInfrastructure }),
            Effect.catch((e) =>
              Effect.logError(`could not mark ${trackedId} PUSHED_FAILURE after dead-lettering: ${e.message}`)
            ),
            Effect.provideService(OutboxStore, store)
          )
        }
      })

    /**
     * Runs one record to its end: processed, skipped, or dead-lettered. `parked` when held back.
     * `first` is a try already made (in a batch): it counts as attempt 1 and is not repeated.
     * `rows` are the local outbox rows read for the whole batch: attempt 1 decides from them
     * (the transitions it makes are compare-and-set, so a row that moved since is seen then);
     * retries read the row again.
     */
    const handleRecord = (
      state: PartitionState,
      record: ConsumerRecord,
      first?: { readonly exit: Exit.Exit<RecordResult, unknown>; readonly tracked: { id: EventId | null } },
      rows?: ReadonlyMap<string, OutboxMessage>
    ) =>
      Effect.gen(function* () {
        if (parking && record.key !== null && first === undefined) {
          const waiting = state.parked.get(record.key)
          if (waiting !== undefined) {
            waiting.push(record)
            return "parked" as const
          }
        }
        // `attempts` counts the record's own failures (handler, decoding) plus the try under way;
        // infrastructure failures are retried in the inner loop and never count (H2).
        let attempts = 1
        let tries = 0
        const tracked: { id: EventId | null } = first?.tracked ?? { id: null }
        let replay = first?.exit
        const result = yield* Effect.suspend(() => {
          if (replay === undefined) {
            return ++tries === 1 && rows !== undefined
              ? attemptOnce(record, attempts, tracked, (id) => Effect.succeed(Option.fromNullishOr(rows.get(id))))
              : attemptOnce(record, attempts, tracked)
          }
          const exit = replay
          replay = undefined
          tries++
          return exit
        }).pipe(
          Effect.tapError((error) =>
            isInfrastructure(error) ? reportInfrastructureFailure(record, error) : Effect.void
          ),
          Effect.retry({ schedule: infrastructureRetry, while: isInfrastructure }),
          Effect.tapError((error) =>
            attempts < maxAttempts && classify(error) === "transient"
              ? Effect.andThen(Metric.update(retriesTotal, 1), Effect.sync(() => attempts++))
              : Effect.void
          ),
          Effect.retry({
            schedule: retryPolicy,
            while: (error) => classify(error) === "transient",
            times: maxAttempts - 1
          }),
          Effect.result
        )
        if (result._tag === "Success") {
          yield* countRecord(result.success)
          return "done" as const
        }
        // The work may have committed and only the bookkeeping after it kept failing (the SUCCESS
        // transition, a lost commit acknowledgement): such a record is processed, not poison.
        // The check never answers "no" because the database is down: it waits for it (H2).
        const processed = Option.isSome(inboxStore)
          ? yield* inboxStore.value.exists(Inbox.keyOf(options.groupId, record, identity)).pipe(
              Effect.tapError((error) => reportInfrastructureFailure(record, error)),
              Effect.retry({ schedule: infrastructureRetry, while: isInfrastructure }),
              Effect.orElseSucceed(() => false)
            )
          : false
        if (processed) {
          yield* Effect.logWarning(
            `${record.topic}/${record.partition}@${record.offset} was processed but its bookkeeping failed ` +
              `${attempts} time(s): ${DeadLetter.errorMessage(result.failure)}; its outbox row is reconciled on redelivery`
          )
          yield* countRecord("processed")
          return "done" as const
        }
        yield* deadLetter(record, result.failure, attempts, tracked.id)
        yield* countRecord("dead_lettered")
        if (parking && record.key !== null) state.parked.set(record.key, [])
        return "done" as const
      }).pipe(
        Effect.withSpan("outbox.consumer.record", {
          attributes: {
            "outbox.topic": record.topic,
            "outbox.partition": record.partition,
            "outbox.offset": record.offset
          }
        })
      )

    // -- offsets ---------------------------------------------------------------------------------

    const markDone = (state: PartitionState, offset: bigint) => {
      const i = state.notDone.indexOf(offset)
      if (i >= 0) state.notDone.splice(i, 1)
    }

    const commitPartition = (state: PartitionState) =>
      Effect.suspend(() => {
        // The highest contiguous finished offset: below the first unfinished one (R4.5).
        const next = state.notDone.length > 0 ? state.notDone[0]! : state.maxDelivered + 1n
        if (next <= state.lastCommitted) return Effect.void
        return subscription.commit([{ topic: state.topic, partition: state.partition, offset: next.toString() }]).pipe(
          Effect.retry({
            schedule: infrastructureSchedule.pipe(Schedule.upTo({ times: 3 })),
            while: (e) => e.retriable
          }),
          Effect.tap(() =>
            Effect.sync(() => {
              if (next > state.lastCommitted) state.lastCommitted = next
            })
          ),
          // A lost commit only means redelivery, which the inbox absorbs.
          Effect.catch((e) =>
            Effect.logWarning(`offset commit ${state.topic}/${state.partition}@${next} failed: ${e.message}`)
          )
        )
      })

    const processBatch = (state: PartitionState, batch: ConsumerBatch) =>
      Effect.gen(function* () {
        const first = BigInt(batch.records[0]!.offset)
        if (first <= state.maxDelivered) {
          // A rewind: the partition went to another member and came back at the group's
          // committed offset. Everything from `first` on is redelivered, everything before it was
          // finished by someone: what this member remembered (parked records, unfinished offsets)
          // is stale. (A forward gap is normal — transaction markers, compaction — and keeps it.)
          state.notDone = []
          state.parked.clear()
          state.maxDelivered = first - 1n
          state.lastCommitted = first
        }
        for (const record of batch.records) {
          const offset = BigInt(record.offset)
          if (!state.notDone.includes(offset)) insertSorted(state.notDone, offset)
          if (offset > state.maxDelivered) state.maxDelivered = offset
        }
        if (perBatch) yield* processInOneTransaction(state, batch.records)
        else {
          // One read of the batch's local outbox rows instead of one per record (when it fails,
          // each record reads its own).
          const rows = Option.getOrUndefined(yield* Effect.option(lookupRows(batch.records)))
          for (const record of batch.records) {
            // Shutting down: leave the rest unfinished (uncommitted) for the next member.
            if (stopping) break
            const result = yield* handleRecord(state, record, undefined, rows)
            if (result === "done") markDone(state, BigInt(record.offset))
          }
        }
        yield* commitPartition(state)
      })

    /** The local outbox rows of `records`, in one read. */
    const lookupRows = (records: ReadonlyArray<ConsumerRecord>) =>
      Effect.gen(function* () {
        const rows = new Map<string, OutboxMessage>()
        if (!lifecycle) return rows
        const ids = new Set<EventId>()
        for (const record of records) {
          const id = record.headers[EVENT_ID_HEADER]
          if (id !== undefined && isEventId(id)) ids.add(id)
        }
        if (ids.size === 0) return rows
        for (const row of yield* store.list({ ids: [...ids], limit: ids.size })) rows.set(row.id, row)
        return rows
      })

    /**
     * Per-batch mode: the records in order, as few transactions as failures allow. Each round
     * prepares records up to the first that cannot join (parked ones wait as usual), runs them
     * through `Inbox.processBatch` stopping at the first failing work, finishes the committed ones,
     * and hands the failing record to `handleRecord` with its try as attempt 1; the next round
     * starts after it (so a dead letter parks the rest of its key before they are looked at).
     */
    const processInOneTransaction = (state: PartitionState, records: ReadonlyArray<ConsumerRecord>) =>
      Effect.gen(function* () {
        const done = (record: ConsumerRecord) => markDone(state, BigInt(record.offset))
        let i = 0
        while (i < records.length && !stopping) {
          const rest = records.slice(i)
          const rows = yield* Effect.exit(lookupRows(rest))
          if (Exit.isFailure(rows)) {
            // The lookup failed: this record the per-record way (which retries its own lookup).
            if ((yield* handleRecord(state, rest[0]!)) === "done") done(rest[0]!)
            i++
            continue
          }
          const lookup = (id: EventId) => Effect.succeed(Option.fromNullishOr(rows.value.get(id)))
          // Plan: every record up to the first whose preparation fails.
          const plan: Array<Step> = []
          let unprepared:
            | {
                readonly record: ConsumerRecord
                readonly exit: Exit.Exit<never, unknown>
                readonly tracked: { id: EventId | null }
              }
            | undefined
          for (const record of rest) {
            if (parking && record.key !== null && state.parked.has(record.key)) {
              plan.push({ _tag: "parked", record })
              continue
            }
            const tracked: { id: EventId | null } = { id: null }
            const prepared = yield* Effect.exit(prepare(record, 1, tracked, lookup))
            if (Exit.isFailure(prepared)) {
              unprepared = { record, exit: Exit.failCause(prepared.cause), tracked }
              break
            }
            plan.push(
              prepared.value._tag === "skip" ? { _tag: "skip", record } : { ...prepared.value, record, tracked }
            )
          }
          const runs = plan.filter((step) => step._tag === "run")
          const results = runs.length === 0 ? [] : yield* inbox.processBatch(runs, { stopAtFailure: true })
          // Apply it in order, up to the first failing work; what follows is planned again.
          let ran = 0
          let applied = 0
          for (const step of plan) {
            if (step._tag === "parked") {
              state.parked.get(step.record.key!)!.push(step.record)
            } else if (step._tag === "skip") {
              yield* countRecord("skipped")
              done(step.record)
            } else {
              const exit = results[ran++]!
              const outcome = Exit.isSuccess(exit) ? yield* Effect.exit(finish(exit.value, step.tracked)) : exit
              if (Exit.isSuccess(outcome)) {
                yield* countRecord(outcome.value)
                done(step.record)
              } else {
                // Its try failed: attempt 1 of the per-record path (retries, dead letter, parking).
                const first = { exit: outcome, tracked: step.tracked }
                if ((yield* handleRecord(state, step.record, first)) === "done") done(step.record)
              }
              if (Exit.isFailure(exit)) {
                applied++
                break
              }
            }
            applied++
          }
          if (unprepared !== undefined && applied === plan.length) {
            if ((yield* handleRecord(state, unprepared.record, unprepared)) === "done") done(unprepared.record)
            applied++
          }
          i += applied
        }
      })

    // -- partitions ------------------------------------------------------------------------------

    const worker = (state: PartitionState): Effect.Effect<void, ConsumerError> =>
      Effect.gen(function* () {
        while (true) {
          const next = yield* Effect.exit(Queue.take(state.queue))
          if (Exit.isFailure(next)) return
          yield* processBatch(state, next.value).pipe(state.lock.withPermits(1), permits.withPermits(1))
        }
      })

    const partitionOf = (topic: string, partition: number) =>
      Effect.gen(function* () {
        const id = `${topic}\u0000${partition}`
        const existing = partitions.get(id)
        if (existing !== undefined) return existing
        const state: PartitionState = {
          topic,
          partition,
          queue: yield* Queue.bounded<ConsumerBatch, Cause.Done>(Math.max(1, options.bufferedBatches ?? 2)),
          lock: yield* Semaphore.make(1),
          notDone: [],
          maxDelivered: -1n,
          lastCommitted: -1n,
          parked: new Map(),
          fiber: undefined
        }
        partitions.set(id, state)
        state.fiber = yield* worker(state).pipe(
          Effect.tapCause((cause) =>
            Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(failed, cause)
          ),
          Effect.forkIn(workerScope)
        )
        return state
      })

    const dispatcher = yield* subscription.batches.pipe(
      Stream.runForEach((batch) =>
        batch.records.length === 0
          ? Effect.void
          : Effect.flatMap(partitionOf(batch.topic, batch.partition), (state) => Queue.offer(state.queue, batch))
      ),
      Effect.tapCause((cause) => (Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(failed, cause))),
      Effect.forkIn(scope)
    )

    // Graceful shutdown, registered after `subscribe` so it runs before the group is left.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interrupt(dispatcher)
        for (const state of partitions.values()) yield* Queue.end(state.queue)
        const fibers = [...partitions.values()].flatMap((state) => (state.fiber === undefined ? [] : [state.fiber]))
        yield* Fiber.awaitAll(fibers).pipe(
          Effect.timeoutOption(options.shutdownTimeout ?? Duration.seconds(30)),
          Effect.asVoid
        )
        yield* Scope.close(workerScope, Exit.void)
        for (const state of partitions.values()) yield* commitPartition(state)
      })
    )

    const release: Consumer["release"] = (target) =>
      Effect.gen(function* () {
        const state = partitions.get(`${target.topic}\u0000${target.partition}`)
        if (state === undefined) return 0
        return yield* Effect.gen(function* () {
          const waiting = state.parked.get(target.key)
          if (waiting === undefined) return 0
          state.parked.delete(target.key)
          let processed = 0
          // A record that fails again parks the key anew; `handleRecord` then queues the rest
          // behind it, in order.
          for (const record of waiting) {
            const result = yield* handleRecord(state, record)
            if (result === "done") {
              markDone(state, BigInt(record.offset))
              processed++
            }
          }
          yield* commitPartition(state)
          return processed
        }).pipe(state.lock.withPermits(1))
      })

    return {
      parked: Effect.sync(() =>
        [...partitions.values()].flatMap((state) =>
          [...state.parked.entries()].map(([key, records]) => ({
            topic: state.topic,
            partition: state.partition,
            key,
            offsets: records.map((record) => record.offset)
          }))
        )
      ),
      release,
      await: Deferred.await(failed)
    } satisfies Consumer
  })

/**
 * Runs a consumer until it is interrupted (then shuts down gracefully) or fails.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = <S extends Schema.Top, E, R>(
  options: Options<S, E, R>
): Effect.Effect<never, ConsumerError, Requirements | R | S["DecodingServices"]> =>
  Effect.scoped(Effect.flatMap(make(options), (consumer) => consumer.await))

const insertSorted = (values: Array<bigint>, value: bigint) => {
  let i = values.length
  while (i > 0 && values[i - 1]! > value) i--
  values.splice(i, 0, value)
}
