/**
 * The consumer's options and what the record runner makes of them: their defaults, the payload
 * decoder, and the handler's work for one record. Exported through `Consumer`.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import type { ConsumerRecord } from "../../ConsumerSource.ts"
import * as DeadLetter from "../../DeadLetter.ts"
import { HandlerDefectError, PayloadDecodeError } from "../../Errors.ts"
import * as Inbox from "../../Inbox.ts"
import { InboxStore } from "../../InboxStore.ts"
import { decodePayload } from "../../OutboxMessage.ts"
import { OutboxStore } from "../../OutboxStore.ts"
import { Publisher } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"
import * as Classify from "./classify.ts"
import * as RecordRunner from "./record.ts"

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
   * too: the event id, or the record's offset identity when it has none.
   */
  readonly idempotencyKey: string
  /** 1 for the first try, 2 for the first retry, … */
  readonly attempt: number
}

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
   * A record older than the inbox's deduplication window (its event time before what the inbox
   * still remembers): `"dead-letter"` it with `InboxWindowExpiredError` (default, or
   * `OUTBOX_INBOX_ON_EXPIRED` under `OutboxRuntime`), or `"process"` it knowingly as new. Either
   * way a WARN log and `outbox_inbox_processed_total{outcome="expired"}`.
   */
  readonly onExpired?: Inbox.ExpiredPolicy
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
  readonly classify?: Classify.Classifier
  /**
   * Which failures are the infrastructure's (default {@link defaultIsInfrastructure}): retried with
   * `infrastructureRetrySchedule` without limit, never counted as an attempt, never dead-lettered.
   */
  readonly isInfrastructure?: Classify.InfrastructureTest
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

/**
 * Set by `OutboxRuntime` on the log engine, where events have no outbox row: the lifecycle step
 * (one row look-up per record or batch) is skipped, whatever `lifecycle` says.
 */
export const NoOutboxRows = Context.Reference<boolean>("@effect-outbox/core/Consumer/NoOutboxRows", {
  defaultValue: () => false
})

/**
 * The `onExpired` of consumers that do not set one: `OutboxRuntime` provides its configured
 * `OUTBOX_INBOX_ON_EXPIRED`; elsewhere `"dead-letter"`.
 */
export const DefaultExpiredPolicy = Context.Reference<Inbox.ExpiredPolicy>(
  "@effect-outbox/core/Consumer/DefaultExpiredPolicy",
  { defaultValue: () => "dead-letter" }
)

/** The record runner's settings: the options, their defaults, and the services in context. */
export const recordSettings = <S extends Schema.Top, E, R>(options: Options<S, E, R>) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<R | S["DecodingServices"]>()
    const provideUser = <A, E2>(effect: Effect.Effect<A, E2, R | S["DecodingServices"]>) =>
      Effect.provideContext(effect, context)
    const decode = decodePayload(options.schema)
    return {
      groupId: options.groupId,
      identity: options.identity ?? "event-id",
      onExpired: options.onExpired ?? (yield* DefaultExpiredPolicy),
      lifecycle: (options.lifecycle ?? true) && !(yield* NoOutboxRows),
      maxAttempts: Math.max(1, options.maxAttempts ?? 5),
      classify: options.classify ?? Classify.defaultClassifier,
      isInfrastructure: options.isInfrastructure ?? Classify.defaultIsInfrastructure,
      retrySchedule: options.retrySchedule ?? defaultRetrySchedule,
      infrastructureRetry: options.infrastructureRetrySchedule ?? infrastructureRetrySchedule,
      deadLetterTopic: options.deadLetterTopic ?? DeadLetter.defaultTopic,
      decode: (record) =>
        decode(record.value).pipe(
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
    runningSpan(Telemetry.spans.consumerHandler, {
      attributes: {
        "outbox.topic": record.topic,
        "outbox.partition": record.partition,
        "outbox.offset": record.offset
      }
    }),
    // Outermost, so the handler span itself is a child of the enqueueing span and the
    // handler's own spans are children of the handler span.
    Telemetry.withParentFromHeaders(record.headers)
  )
}
