/**
 * The idempotent consumer runner (R4, R5, R2.5): runs a handler over a `ConsumerSource`.
 *
 * For each record, per partition in offset order:
 * 1. a record of a parked key waits behind its dead-lettered predecessor (optional parking);
 * 2. a locally known outbox row that is already finished (`SUCCESS`, this group's
 *    `PUSHED_FAILURE`) is skipped (R4.4); a `FAILURE` row is processed and reported (C2);
 * 3. a known row still `DISPATCHING` / `PUBLISHED` moves to `UNDER_PROCESSING` (R2.5);
 * 4. the payload is decoded (Schema) and the handler runs inside `Inbox.processOnce` — one
 *    transaction with the dedup record (R4.1); the handler gets the event id as its idempotency
 *    key for outside effects (R4.6);
 * 5. the row moves to `SUCCESS`; a record found `already_processed` whose row never reached
 *    `SUCCESS` is reconciled without running the handler again (R4.4);
 * 6. infrastructure failures (database down, transaction lost) pause the partition and are retried
 *    without limit, outside the attempt budget (H2); the record's own transient failures retry
 *    under a `Schedule`; permanent failures and exhausted retries go to the dead-letter topic and
 *    the row to `PUSHED_FAILURE` (R5.1, R5.2); the partition moves on.
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
 * The pieces: `internal/consumer/record.ts` (one record: lifecycle, decoding, the inbox, retries,
 * dead letter), `partition.ts` (offsets, parking), `batch.ts` (a fetched batch, both transaction
 * modes); this module wires them to the source (one worker per partition, graceful shutdown).
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
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { type ConsumerBatch, type ConsumerRecord, ConsumerSource } from "./ConsumerSource.ts"
import * as DeadLetter from "./DeadLetter.ts"
import { ConsumerSourceError, HandlerDefectError, PayloadDecodeError } from "./Errors.ts"
import * as Inbox from "./Inbox.ts"
import { InboxStore } from "./InboxStore.ts"
import * as Batch from "./internal/consumer/batch.ts"
import * as Classify from "./internal/consumer/classify.ts"
import type { PartitionState } from "./internal/consumer/partition.ts"
import * as Partition from "./internal/consumer/partition.ts"
import * as RecordRunner from "./internal/consumer/record.ts"
import { OutboxStore } from "./OutboxStore.ts"
import { ParkedStore } from "./ParkedStore.ts"
import { Publisher } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
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

// ---------------------------------------------------------------------------------------------
// whose failure is it
// ---------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category classification
 */
export type Classification = Classify.Classification

/**
 * Decides whether a record's own failure is worth retrying (R5.2).
 *
 * @since 0.1.0
 * @category classification
 */
export type Classifier = Classify.Classifier

/**
 * The default classifier:
 * - `PayloadDecodeError`, `SchemaError`, `OutboxValidationError`: permanent (the same input fails
 *   the same way);
 * - any error with a boolean `retriable` field (`OutboxStoreError`, publish errors, …): by that
 *   field;
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
 * Decides whether a failure is the infrastructure's, not the record's (H2): such a failure pauses
 * the partition and is retried without limit; it never counts toward `maxAttempts` and never
 * dead-letters.
 *
 * @since 0.1.0
 * @category classification
 */
export type InfrastructureTest = Classify.InfrastructureTest

/**
 * The default infrastructure test: a retriable `OutboxStoreError` (the lookup, a transition, the
 * inbox's BEGIN/INSERT/COMMIT, a lost connection) or an `SqlError` of the database rather than the
 * statement — connection errors, SQLSTATE classes 08 and 53, 57P01-3 (shutting down, starting
 * up), 40001, 40P01 — also when the handler's own SQL raised it: a handler waiting on the same
 * database is not poison, the record waits with it.
 *
 * @since 0.1.0
 * @category classification
 */
export const defaultIsInfrastructure: InfrastructureTest = Classify.defaultIsInfrastructure

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
  /** The record's own tries before it is dead-lettered, the first included (default 5); infrastructure failures never count. */
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
  /** Delays between retries of infrastructure failures (default exponential from 200 ms, jittered, capped at 5 s; forever). */
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
   * consumer group but one when several groups consume the same events from one database: a
   * second driving group would skip what the first finished. `OutboxRuntime.layer` refuses two
   * driving groups on one topic (`LifecycleGroupConflictError`).
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
  /**
   * With durable parking (`parking: true` and a `ParkedStore` in context): how often the consumer
   * looks for release requests (`effect-outbox parked release`), default 5 s.
   */
  readonly parkedReleaseInterval?: Duration.Input
  /** Batches buffered per partition before the source stops fetching it (paused, default 2). */
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
// metrics (defined in Telemetry.ts)
// ---------------------------------------------------------------------------------------------

/**
 * Records finished by the consumer, with attribute `result`: `processed`, `already_processed`,
 * `skipped` (finished outbox row), `dead_lettered`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const recordsTotal = Telemetry.consumerRecordsTotal

/**
 * Missing `SUCCESS` transitions repaired without running the handler again (R4.4).
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciledTotal = Telemetry.consumerReconciledTotal

/**
 * Handler tries that failed and will be retried.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retriesTotal = Telemetry.consumerRetriesTotal

/**
 * Tries that failed on the infrastructure and are retried without limit, outside the attempt
 * budget (H2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const infrastructureRetriesTotal = Telemetry.consumerInfrastructureRetriesTotal

/**
 * Records of revoked partitions dropped before their handler ran (M3): a rebalance moved the
 * partition, its new owner processes them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const revokedRecordsTotal = Telemetry.consumerRevokedRecordsTotal

/**
 * Delivered records whose local outbox row said they should not have been delivered, with
 * attribute `kind` (`failure_row_delivered`, C2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const anomaliesTotal = Telemetry.consumerAnomaliesTotal

// ---------------------------------------------------------------------------------------------
// schedules
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
// the runner
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
    const settings = yield* recordSettings(options)
    const subscription = yield* source.subscribe({
      groupId: options.groupId,
      topics: options.topics,
      fromBeginning: options.fromBeginning ?? true
    })
    const scope = yield* Effect.scope
    const failed = yield* Deferred.make<never, ConsumerError>()
    const permits = yield* Semaphore.make(Math.max(1, options.concurrency ?? 8))
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
    const workers: Workers = {
      batch,
      partitions,
      failed,
      permits,
      scope: yield* Scope.fork(scope),
      bufferedBatches: Math.max(1, options.bufferedBatches ?? 2)
    }
    const dispatcher = yield* dispatch(workers).pipe(Effect.forkIn(scope))
    // Graceful shutdown, registered after `subscribe` so it runs before the group is left.
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Effect.sync(() => {
          stopping = true
        }),
        shutdown(workers, dispatcher, options.shutdownTimeout ?? Duration.seconds(30))
      )
    )
    const durable = batch.parking && parkedStore !== undefined
    const reader = Option.getOrUndefined(yield* Effect.serviceOption(TopicReader))
    if (durable) {
      // Releases asked for elsewhere (the CLI's `parked release`) run on the member that owns
      // the partition: it has the handler.
      yield* serveReleaseRequests(workers, parkedStore, reader).pipe(
        Effect.repeat(Schedule.spaced(options.parkedReleaseInterval ?? Duration.seconds(5))),
        Effect.forkIn(scope)
      )
    }
    return {
      parked: durable ? durableParkedKeys(parkedStore, options.groupId) : parkedKeys(partitions),
      release: durable ? releaseDurably(workers, parkedStore, reader) : release(workers),
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

/** The record runner's settings: the options, their defaults, and the services in context. */
const recordSettings = <S extends Schema.Top, E, R>(options: Options<S, E, R>) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<R | S["DecodingServices"]>()
    const provideUser = <A, E2>(effect: Effect.Effect<A, E2, R | S["DecodingServices"]>) =>
      Effect.provideContext(effect, context)
    const decodeJson = Schema.decodeUnknownEffect(Schema.fromJsonString(options.schema))
    return {
      groupId: options.groupId,
      identity: options.identity ?? "event-id",
      lifecycle: options.lifecycle ?? true,
      maxAttempts: Math.max(1, options.maxAttempts ?? 5),
      classify: options.classify ?? defaultClassifier,
      isInfrastructure: options.isInfrastructure ?? defaultIsInfrastructure,
      retrySchedule: options.retrySchedule ?? defaultRetrySchedule,
      infrastructureRetry: options.infrastructureRetrySchedule ?? infrastructureRetrySchedule,
      deadLetterTopic: options.deadLetterTopic ?? DeadLetter.defaultTopic,
      decode: (record) =>
        decodeJson(new TextDecoder().decode(record.value)).pipe(
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
        ),
      handle: (record, payload, attempt) => provideUser(handlerWork(options, record, payload as S["Type"], attempt)),
      inbox: yield* Inbox.Inbox,
      // Optional: with it, a record whose work committed is never dead-lettered.
      inboxStore: yield* Effect.serviceOption(InboxStore),
      store: yield* OutboxStore,
      publisher: yield* Publisher
    } satisfies RecordRunner.RecordSettings
  })

/** The handler's work for one decoded record: its message, its span, defects as errors. */
const handlerWork = <S extends Schema.Top, E, R>(
  options: Options<S, E, R>,
  record: ConsumerRecord,
  payload: S["Type"],
  attempt: number
) => {
  const eventId = RecordRunner.eventIdOf(record)
  const message: Message<S["Type"]> = {
    payload,
    record,
    key: record.key,
    eventId,
    idempotencyKey: eventId ?? Inbox.originalOffsetIdentity(record),
    attempt
  }
  return options.handler(message).pipe(
    Effect.catchDefect((defect) =>
      Effect.fail(new HandlerDefectError({ reason: DeadLetter.errorMessage(defect), cause: defect }))
    ),
    Effect.withSpan(Telemetry.spans.consumerHandler, {
      attributes: { "outbox.topic": record.topic, "outbox.partition": record.partition, "outbox.offset": record.offset }
    }),
    // Outermost, so the handler span itself is a child of the enqueueing span (R8.2) and the
    // handler's own spans are children of the handler span.
    Telemetry.withParentFromHeaders(record.headers)
  )
}

/** The partitions' workers and what they share. */
interface Workers {
  readonly batch: Batch.BatchSettings
  readonly partitions: Map<string, PartitionState>
  readonly failed: Deferred.Deferred<never, ConsumerError>
  /** At most `concurrency` partitions process a batch at the same time. */
  readonly permits: Semaphore.Semaphore
  readonly scope: Scope.Closeable
  readonly bufferedBatches: number
}

/**
 * Hands each fetched batch to its partition's buffer (a worker per partition, started on demand).
 * It never waits on a partition (M2): a partition whose buffer is full is paused at the source
 * and resumed when its worker catches up, so a slow or retrying partition holds back neither the
 * others nor the member's rejoin in a rebalance (the source is always pulled promptly).
 */
const dispatch = (workers: Workers) =>
  workers.batch.subscription.batches.pipe(
    Stream.runForEach((batch) =>
      batch.records.length === 0
        ? Effect.void
        : Effect.flatMap(partitionOf(workers, batch.topic, batch.partition), (state) =>
            Effect.andThen(Queue.offer(state.queue, batch), () =>
              !state.paused && Queue.sizeUnsafe(state.queue) >= workers.bufferedBatches
                ? Effect.andThen(
                    Effect.sync(() => {
                      state.paused = true
                    }),
                    workers.batch.subscription.pause([state])
                  )
                : Effect.void
            )
          )
    ),
    Effect.tapCause((cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(workers.failed, cause)
    )
  )

const partitionOf = (workers: Workers, topic: string, partition: number) =>
  Effect.gen(function* () {
    const id = Partition.idOf(topic, partition)
    const existing = workers.partitions.get(id)
    if (existing !== undefined) return existing
    const state: PartitionState = {
      topic,
      partition,
      // Unbounded, but pausing bounds it: at most what the source fetched before the pause.
      queue: yield* Queue.unbounded<ConsumerBatch, Cause.Done>(),
      lock: yield* Semaphore.make(1),
      notDone: [],
      maxDelivered: -1n,
      lastCommitted: -1n,
      parked: new Map(),
      fiber: undefined,
      paused: false,
      latest: undefined
    }
    workers.partitions.set(id, state)
    state.fiber = yield* work(workers, state).pipe(
      Effect.tapCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.void : Deferred.failCause(workers.failed, cause)
      ),
      Effect.forkIn(workers.scope)
    )
    return state
  })

/** A partition's worker: its batches in order, until its queue ends. */
const work = (workers: Workers, state: PartitionState): Effect.Effect<void, DeadLetter.DeadLetterPublishError> =>
  Effect.gen(function* () {
    while (true) {
      const next = yield* Effect.exit(Queue.take(state.queue))
      if (Exit.isFailure(next)) return
      if (state.paused && Queue.sizeUnsafe(state.queue) < workers.bufferedBatches) {
        state.paused = false
        yield* workers.batch.subscription.resume([state])
      }
      yield* Batch.processBatch(workers.batch, state, next.value).pipe(
        state.lock.withPermits(1),
        workers.permits.withPermits(1)
      )
    }
  })

/** Stops fetching, lets records in flight finish for up to `timeout`, commits what finished. */
const shutdown = (workers: Workers, dispatcher: Fiber.Fiber<void, unknown>, timeout: Duration.Input) =>
  Effect.gen(function* () {
    yield* Fiber.interrupt(dispatcher)
    const states = [...workers.partitions.values()]
    for (const state of states) yield* Queue.end(state.queue)
    const fibers = states.flatMap((state) => (state.fiber === undefined ? [] : [state.fiber]))
    yield* Fiber.awaitAll(fibers).pipe(Effect.timeoutOption(timeout), Effect.asVoid)
    yield* Scope.close(workers.scope, Exit.void)
    for (const state of states) yield* Partition.commit(workers.batch.subscription, state)
  })

const parkedKeys = (partitions: ReadonlyMap<string, PartitionState>): Effect.Effect<ReadonlyArray<ParkedKey>> =>
  Effect.sync(() =>
    [...partitions.values()].flatMap((state) =>
      [...state.parked.entries()].map(([key, records]) => ({
        topic: state.topic,
        partition: state.partition,
        key,
        offsets: records.map((record) => record.offset)
      }))
    )
  )

/**
 * Processes a parked key's records now, in order. One that fails again is dead-lettered and parks
 * the rest again (the record runner queues them behind it).
 */
const release =
  (workers: Workers): Consumer["release"] =>
  (target) =>
    Effect.gen(function* () {
      const state = workers.partitions.get(Partition.idOf(target.topic, target.partition))
      if (state === undefined) return 0
      return yield* Effect.gen(function* () {
        const waiting = Partition.unpark(state, target.key)
        if (waiting === undefined) return 0
        let processed = 0
        for (const record of waiting) {
          if ((yield* Batch.handleRecord(workers.batch, state, record)) === "done") processed++
        }
        yield* Partition.commit(workers.batch.subscription, state)
        return processed
      }).pipe(state.lock.withPermits(1))
    })

/** Durable parking: the group's parked keys as the store has them. */
const durableParkedKeys = (store: ParkedStore["Service"], groupId: string): Effect.Effect<ReadonlyArray<ParkedKey>> =>
  store.list({ consumer: groupId }).pipe(
    Effect.map((keys) =>
      keys.map(({ key, offsets, partition, topic }): ParkedKey => ({ topic, partition, key, offsets }))
    ),
    Effect.orDie
  )

/**
 * Durable parking: re-reads the key's parked records by position (`TopicReader`) and runs them
 * head first, in offset order, on the partition's lock (no record of the key interleaves). A
 * record dead-lettered again stops the release: it and the rest stay parked. Only the member that
 * owns the partition releases it (another would race its worker); elsewhere it answers 0.
 */
const releaseDurably =
  (workers: Workers, store: ParkedStore["Service"], reader: TopicReader["Service"] | undefined): Consumer["release"] =>
  (target) =>
    Effect.gen(function* () {
      const state = workers.partitions.get(Partition.idOf(target.topic, target.partition))
      if (state === undefined || !owns(workers, state)) return 0
      if (reader === undefined) {
        return yield* new ConsumerSourceError({
          operation: "read",
          reason: "releasing a durably parked key re-reads its records: provide a TopicReader",
          retriable: false
        })
      }
      const groupId = workers.batch.record.groupId
      return yield* Effect.gen(function* () {
        const [parked] = (yield* store
          .list({ consumer: groupId, topic: target.topic, partition: target.partition })
          .pipe(Effect.orDie)).filter((k) => k.key === target.key)
        if (parked === undefined) return 0
        const wanted = new Set(parked.offsets)
        const records = (yield* reader.read(target.topic).pipe(
          Stream.filter((r) => r.partition === target.partition && wanted.has(r.offset)),
          Stream.runCollect
        )).sort((a, b) => (BigInt(a.offset) < BigInt(b.offset) ? -1 : 1))
        let processed = 0
        for (const record of records) {
          const result = yield* RecordRunner.runRecord(workers.batch.record, record)
          if (result === "dead_lettered") break
          yield* store.remove(groupId, [record]).pipe(Effect.orDie)
          processed++
        }
        // Positions the topic no longer holds (retention) cannot run: they are forgotten.
        const found = new Set(records.map((r) => r.offset))
        const gone = parked.offsets.filter((offset) => !found.has(offset))
        if (gone.length > 0) {
          yield* Effect.logWarning(
            `parked ${target.topic}/${target.partition} key ${target.key}: offsets ${gone.join(", ")} are no longer on the topic`
          )
          yield* store
            .remove(
              groupId,
              gone.map((offset) => ({ ...target, offset }))
            )
            .pipe(Effect.orDie)
        }
        yield* Batch.refreshParked(workers.batch, state)
        return processed
      }).pipe(state.lock.withPermits(1))
    })

const owns = (workers: Workers, state: PartitionState): boolean =>
  state.latest !== undefined && workers.batch.subscription.isCurrent(state.latest)

/** Runs the release requests for partitions this member owns, then clears them. */
const serveReleaseRequests = (
  workers: Workers,
  store: ParkedStore["Service"],
  reader: TopicReader["Service"] | undefined
) =>
  Effect.gen(function* () {
    const requests = yield* store.releaseRequests(workers.batch.record.groupId)
    for (const request of requests) {
      const state = workers.partitions.get(Partition.idOf(request.topic, request.partition))
      if (state === undefined || !owns(workers, state)) continue
      const processed = yield* releaseDurably(workers, store, reader)(request)
      yield* store.clearRelease(request)
      yield* Effect.logInfo(
        `released parked key ${request.key} of ${request.topic}/${request.partition}: ${processed} record(s) processed`
      )
    }
  }).pipe(
    Effect.catch((error) => Effect.logWarning(`serving parked release requests failed: ${error.message}`)),
    Effect.withSpan(Telemetry.spans.consumerParkedRelease)
  )
