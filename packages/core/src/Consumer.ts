/**
 * The idempotent consumer runner: runs a handler over a `ConsumerSource`.
 *
 * For each record, per partition in offset order:
 * 1. a record of a parked key waits behind its dead-lettered predecessor (optional parking);
 * 2. a locally known outbox row that is already finished (`SUCCESS`, this group's
 *    `PUSHED_FAILURE`) is skipped; a `FAILURE` row is processed and reported;
 * 3. a known row still `DISPATCHING` / `PUBLISHED` moves to `UNDER_PROCESSING`;
 * 4. the payload is decoded (Schema) and the handler runs inside `Inbox.processOnce` — one
 *    transaction with the dedup record; the handler gets the event id as its idempotency
 *    key for outside effects;
 * 5. the row moves to `SUCCESS`; a record found `already_processed` whose row never reached
 *    `SUCCESS` is reconciled without running the handler again;
 * 6. infrastructure failures (database down, transaction lost) pause the partition and are retried
 *    without limit, outside the attempt budget; the record's own transient failures retry
 *    under a `Schedule`; permanent failures and exhausted retries go to the dead-letter topic and
 *    the row to `PUSHED_FAILURE`; the partition moves on.
 *
 * Offsets are committed after each batch, only up to the highest offset below which every record
 * finished (committed its transaction, was skipped, or was dead-lettered): a crash anywhere
 * redelivers the unfinished records and the inbox deduplicates them.
 *
 * With `transaction: "per-batch"` the records of a fetched batch share one transaction
 * (`Inbox.processBatch`); the first record that fails commits the ones before it and goes
 * through the per-record path (retries, dead letter, parking) before the rest continue, so the
 * order and the per-record guarantees are the same.
 *
 * The pieces, in `internal/consumer/`: `options.ts` (what the record runner makes of the
 * options, the handler's work), `record.ts` (one record: lifecycle, decoding, the inbox, retries, dead letter),
 * `partition.ts` (offsets, parking), `batch.ts` (a fetched batch, both transaction modes),
 * `workers.ts` (one worker per partition, pausing, graceful shutdown), `release.ts` (parked keys),
 * `keyDispatch.ts` (key-ordered concurrency inside a partition);
 * this module holds the public types, the options and their default schedules, and wires them to
 * the source.
 * Every status change goes through `Transition`.
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import type { Message, Options } from "./ConsumerOptions.ts"
import { type ConsumerRecord, ConsumerSource } from "./ConsumerSource.ts"
import type * as DeadLetter from "./DeadLetter.ts"
import { type ConsumerSourceError, HandlerDefectError, PayloadDecodeError } from "./Errors.ts"
import type * as Inbox from "./Inbox.ts"
import type * as Batch from "./internal/consumer/batch.ts"
import * as Classify from "./internal/consumer/classify.ts"
import * as KeyDispatch from "./internal/consumer/keyDispatch.ts"
import * as RecordOptions from "./internal/consumer/options.ts"
import * as ParkedAge from "./internal/consumer/parkedAge.ts"
import type { PartitionState } from "./internal/consumer/partition.ts"
import * as Release from "./internal/consumer/release.ts"
import * as Workers from "./internal/consumer/workers.ts"
import type { OutboxStore } from "./OutboxStore.ts"
import { ParkedStore } from "./ParkedStore.ts"
import type * as PayloadCodec from "./PayloadCodec.ts"
import type { Publisher } from "./Publisher.ts"
import { TopicReader } from "./TopicReader.ts"

// ---------------------------------------------------------------------------------------------
// errors (defined in Errors.ts)
// ---------------------------------------------------------------------------------------------

export {
  /**
   * The handler died (threw, or failed with a defect): retried, then dead-lettered.
   *
   * @since 0.1.0
   * @category errors
   */
  HandlerDefectError,
  /**
   * The payload does not decode with the consumer's schema: permanent, dead-lettered at once.
   *
   * @since 0.1.0
   * @category errors
   */
  PayloadDecodeError
}
// ---------------------------------------------------------------------------------------------
// whose failure is it
// ---------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category classification
 */
export type Classification = Classify.Classification

/**
 * Decides whether a record's own failure is worth retrying.
 *
 * @since 0.1.0
 * @category classification
 */
export type Classifier = Classify.Classifier

/**
 * The default classifier:
 * - any error with a `kind` (`StoreError`, publish errors, your own): `permanent` is permanent,
 *   `transient` and `unavailable` transient;
 * - `PayloadDecodeError`, `SchemaError`, `OutboxValidationError`: permanent (the same input fails
 *   the same way);
 * - any other error with a boolean `retriable` field: by that field;
 * - anything else, `HandlerDefectError` included: transient — retried a bounded number of times,
 *   then dead-lettered, so an unknown error costs a few retries, never a blocked partition.
 *
 * Infrastructure failures never reach it (see {@link defaultIsInfrastructure}).
 *
 * @since 0.1.0
 * @category classification
 */
export const defaultClassifier: Classifier = Classify.defaultClassifier

/**
 * Decides whether a failure is the infrastructure's, not the record's: such a failure pauses
 * the partition and is retried without limit; it never counts toward `maxAttempts` and never
 * dead-letters.
 *
 * @since 0.1.0
 * @category classification
 */
export type InfrastructureTest = Classify.InfrastructureTest

/**
 * The default infrastructure test: an error of kind `unavailable` (a `StoreError` of the lookup, a
 * transition, the inbox's BEGIN/INSERT/COMMIT or a lost connection; a `BrokerUnavailableError`;
 * your own), or an `effect/sql` `SqlError` the driver marks retryable (connection errors,
 * deadlocks, serialization failures, lock and statement timeouts), also when the handler's own SQL
 * raised it: a handler waiting on the same database is not poison, the record waits with it. The
 * adapter decides the kind; for a handler's raw PostgreSQL errors, adapter-pg's
 * `PgErrors.isInfrastructure` also knows the SQLSTATEs the driver files as unknown.
 *
 * @since 0.1.0
 * @category classification
 */
export const defaultIsInfrastructure: InfrastructureTest = Classify.defaultIsInfrastructure

/**
 * The infrastructure test of a consumer whose options set no `isInfrastructure`: core's
 * {@link defaultIsInfrastructure}, unless a database adapter provides its own. adapter-pg's
 * `PgOutbox.layer` provides `PgErrors.isInfrastructure`, so a handler's own SQL failing on a
 * database that is down, read-only or failing over waits with the partition.
 *
 * @since 0.1.0
 * @category classification
 */
export const DefaultInfrastructureTest: Context.Reference<InfrastructureTest> = Classify.DefaultInfrastructureTest

/**
 * Failures that stop the consumer. Handler failures never do: they are dead-lettered.
 *
 * @since 0.1.0
 * @category errors
 */
export type ConsumerError = ConsumerSourceError | DeadLetter.DeadLetterPublishError

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
// the handler's view, the options (ConsumerOptions.ts) and their default schedules
// ---------------------------------------------------------------------------------------------

export type {
  /**
   * The consumer's options: group, topics, schema and handler, then retries, dead letters,
   * parking, lifecycle, transaction mode and shutdown (each documented on its field).
   *
   * @since 0.1.0
   * @category models
   */
  /**
   * Key-ordered concurrency inside a partition (the `concurrency` option's `{ by: "key" }` form).
   *
   * @since 0.1.0
   * @category models
   */
  KeyConcurrency,
  /**
   * What the handler receives: the decoded payload, the record, its key and event id, the
   * idempotency key for outside effects, and the try number.
   *
   * @since 0.1.0
   * @category models
   */
  Message,
  Options
} from "./ConsumerOptions.ts"

/**
 * The default delays between tries: exponential from 100 ms, capped at 10 s, jittered.
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
 * at 5 s (a retry against a database that is down costs one connection attempt; a longer cap would
 * hold a partition that long after the database is back), jittered, without end. Also used for
 * the DLT publish (losing the record is worse than waiting).
 *
 * @since 0.1.0
 * @category constants
 */
export const infrastructureRetrySchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis").pipe(
  Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.seconds(5)))),
  Schedule.jittered
)

// ---------------------------------------------------------------------------------------------
// running a consumer (its metrics are in Telemetry: consumerRecordsTotal, consumerRetriesTotal, …)
// ---------------------------------------------------------------------------------------------

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
    const settings = yield* RecordOptions.recordSettings(options, {
      retry: options.retrySchedule ?? defaultRetrySchedule,
      infrastructure: options.infrastructureRetrySchedule ?? infrastructureRetrySchedule
    })
    const subscription = yield* source.subscribe({
      groupId: options.groupId,
      topics: options.topics,
      fromBeginning: options.fromBeginning ?? true
    })
    const scope = yield* Effect.scope
    const failed = yield* Deferred.make<never, ConsumerError>()
    const keyed =
      typeof options.concurrency === "object" ? KeyDispatch.make(KeyDispatch.resolve(options.concurrency)) : undefined
    const permits = yield* Semaphore.make(
      Math.max(1, typeof options.concurrency === "number" ? options.concurrency : 8)
    )
    const partitions = new Map<string, PartitionState>()
    let stopping = false
    const parkedStore = Option.getOrUndefined(yield* Effect.serviceOption(ParkedStore))
    const batch: Batch.BatchSettings = {
      record: settings,
      parking: options.parking ?? false,
      parkedStore,
      perBatch: options.transaction === "per-batch",
      subscription,
      stopping: () => stopping
    }
    // Workers live in their own scope so shutdown decides when they are interrupted.
    const workers: Workers.Workers = {
      batch,
      partitions,
      failed,
      permits,
      scope: yield* Scope.fork(scope),
      bufferedBatches: Math.max(1, options.bufferedBatches ?? 2),
      keyed
    }
    if (keyed !== undefined) yield* Effect.forkIn(KeyDispatch.sampleEverySecond(keyed, options.groupId), scope)
    const dispatcher = yield* Workers.dispatch(workers).pipe(Effect.forkIn(scope))
    // Graceful shutdown, registered after `subscribe` so it runs before the group is left.
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Effect.sync(() => {
          stopping = true
        }),
        Workers.shutdown(workers, dispatcher, options.shutdownTimeout ?? Duration.seconds(30))
      )
    )
    const durable = batch.parking && parkedStore !== undefined
    const reader = Option.getOrUndefined(yield* Effect.serviceOption(TopicReader))
    if (durable) {
      // Releases asked for elsewhere (the CLI's `parked release`) run on the member that owns
      // the partition: it has the handler.
      const admin = Option.getOrUndefined(yield* Effect.serviceOption(BrokerAdmin))
      const parkedAge = ParkedAge.reportParkedAge(options.groupId, parkedStore, admin)
      yield* Release.serveReleaseRequests(workers, parkedStore, reader).pipe(
        // The parked records' age against the topic's retention, on the same rhythm.
        Effect.andThen(parkedAge),
        Effect.repeat(Schedule.spaced(options.parkedReleaseInterval ?? Duration.seconds(5))),
        Effect.forkIn(scope)
      )
    }
    return {
      parked: durable ? Release.durableParkedKeys(parkedStore, options.groupId) : Release.parkedKeys(partitions),
      release: durable ? Release.releaseDurably(workers, parkedStore, reader) : Release.release(workers),
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
