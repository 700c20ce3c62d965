/**
 * The idempotent consumer's core: `processOnce` records "this consumer handled this
 * message" and runs the work **in one database transaction**, so the effect and its dedup record
 * commit together or not at all.
 *
 * Identities say what "the same message" means:
 * - event-id identity `event:<event-id>` (the article's): the same event republished at another
 *   offset (relay retry, DLT replay) is still recognised. The default.
 * - offset identity `offset:<topic>/<partition>/<offset>` (the seed's): one Kafka record is
 *   handled once; a republish is new work. The fallback for records without an `event-id`.
 *
 * `processBatch` does the same for many messages in one transaction, recording all their keys with
 * one statement (the consumer's per-batch mode).
 *
 * The deduplication window: records are kept by the time of their event (the UUIDv7 event id's
 * time, else the record's), and retention forgets whole spans of time. A message older than what
 * the inbox still remembers comes back `"expired"` and its work does not run: the inbox cannot
 * tell whether it ran before, so it is not run again as if it were new (the consumer then
 * dead-letters it or, when told to, runs it knowingly).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import type { StoreError } from "./Errors.ts"
import { InboxStore, identityTime, type ProcessedKey, type RecordOutcome } from "./InboxStore.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import { EVENT_ID_HEADER, type Headers, ORIGINAL_RECORD_HEADER, ORIGINAL_TIMESTAMP_HEADER } from "./OutboxMessage.ts"
import * as Telemetry from "./Telemetry.ts"
import { Transactor } from "./Transactor.ts"

/**
 * What `processOnce` did: ran the work (and committed it with its record), found the record
 * already there and ran nothing, or found the message older than the deduplication window and
 * ran nothing (`"expired"`).
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "processed" | "already_processed" | "expired"

/**
 * One message of `processBatch`: its processed-message key and the work it causes.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry<E, R> {
  readonly key: ProcessedKey
  readonly work: Effect.Effect<unknown, E, R>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface BatchOptions {
  /**
   * Stop at the first message whose work fails: the result then ends with that message's failure
   * and the messages after it are not run (nor recorded). For consumers that keep per-partition
   * order through retries. Default `false`: every message gets a result.
   */
  readonly stopAtFailure?: boolean
}

/**
 * What a consumer does with a message older than the deduplication window: `"dead-letter"` (the
 * default: it may have run before, an operator decides) or `"process"` (run it knowingly as new).
 *
 * @since 0.1.0
 * @category models
 */
export type ExpiredPolicy = "dead-letter" | "process"

/**
 * A message older than the deduplication window, refused rather than run as new: the inbox no
 * longer remembers whether it ran. Not retriable (the same message is refused the same way);
 * the consumer dead-letters it under `onExpired: "dead-letter"`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InboxWindowExpiredError extends Schema.TaggedError<InboxWindowExpiredError>()("InboxWindowExpiredError", {
  consumer: Schema.String,
  identity: Schema.String,
  /** The message's time (epoch millis). */
  eventTime: Schema.Number,
  /** The oldest time the inbox still remembers (epoch millis). */
  horizon: Schema.Number,
  retriable: Schema.Boolean
}) {
  override get message() {
    const at = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms))
    return (
      `${this.identity} (event time ${at(this.eventTime)}) is older than the inbox's deduplication window ` +
      `(remembered from ${at(this.horizon)}): it may have been processed before, so it is not run as new`
    )
  }
}

/**
 * How a consumer names a message for deduplication.
 *
 * - `"event-id"`: `event:<event-id>`, falling back to the offset identity when the record has no
 *   `event-id` header (a producer outside this library).
 * - `"offset"`: always `offset:<topic>/<partition>/<offset>`.
 *
 * @since 0.1.0
 * @category models
 */
export type IdentityStrategy = "event-id" | "offset"

/**
 * Where a record sits on the broker: enough for the offset identity.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordCoordinates {
  readonly topic: string
  readonly partition: number
  readonly offset: string
  readonly headers: Headers
  /** The broker's timestamp of the record (epoch millis), when known. */
  readonly timestamp?: number | undefined
}

/**
 * @since 0.1.0
 * @category identities
 */
export const eventIdentity = (eventId: string): string => `event:${eventId}`

/**
 * @since 0.1.0
 * @category identities
 */
export const offsetIdentity = (record: {
  readonly topic: string
  readonly partition: number
  readonly offset: string
}): string => `offset:${record.topic}/${record.partition}/${record.offset}`

/**
 * The offset identity of a record as first consumed: a replayed dead letter names its original
 * in the `outbox-original-record` header, so it keeps the original's identity; any other
 * record is itself. A malformed header is ignored.
 *
 * @since 0.1.0
 * @category identities
 */
export const originalOffsetIdentity = (record: RecordCoordinates): string => {
  const original = record.headers[ORIGINAL_RECORD_HEADER]
  return original !== undefined && /^.+\/\d+\/\d+$/.test(original) ? `offset:${original}` : offsetIdentity(record)
}

/**
 * The identity of a record under `strategy`. An empty `event-id` header counts as absent.
 *
 * @since 0.1.0
 * @category identities
 */
export const identityOf = (record: RecordCoordinates, strategy: IdentityStrategy = "event-id"): string => {
  const eventId = record.headers[EVENT_ID_HEADER]
  return strategy === "event-id" && eventId !== undefined && eventId !== ""
    ? eventIdentity(eventId)
    : originalOffsetIdentity(record)
}

/**
 * The processed-message key of `record` for `consumer` (the consumer group, usually).
 *
 * @since 0.1.0
 * @category identities
 */
export const keyOf = (
  consumer: string,
  record: RecordCoordinates,
  strategy: IdentityStrategy = "event-id"
): ProcessedKey => {
  const identity = identityOf(record, strategy)
  const eventTime = identityTime(identity) ?? recordTimestamp(record)
  return eventTime === undefined ? { consumer, identity } : { consumer, identity, eventTime }
}

/**
 * The broker time of a record as first written: a replay's `outbox-original-timestamp`, else its
 * own timestamp. `undefined` when neither is known.
 *
 * @since 0.1.0
 * @category identities
 */
export const recordTimestamp = (record: RecordCoordinates): number | undefined => {
  const original = record.headers[ORIGINAL_TIMESTAMP_HEADER]
  if (original !== undefined && /^\d+$/.test(original)) return Number(original)
  return record.timestamp !== undefined && Number.isFinite(record.timestamp) ? record.timestamp : undefined
}

const byOutcome = {
  processed: Metric.withAttributes(Telemetry.inboxProcessed, { outcome: "processed" }),
  already_processed: Metric.withAttributes(Telemetry.inboxProcessed, { outcome: "already_processed" }),
  expired: Metric.withAttributes(Telemetry.inboxProcessed, { outcome: "expired" }),
  failed: Metric.withAttributes(Telemetry.inboxProcessed, { outcome: "failed" })
}
const count = (outcome: Outcome | "failed", n = 1) => Metric.update(byOutcome[outcome], n)

// A batch's outcomes counted with one update per outcome.
const countAll = (results: ReadonlyArray<Exit.Exit<Outcome, unknown>>) =>
  Effect.suspend(() => {
    const tally = { processed: 0, already_processed: 0, expired: 0, failed: 0 }
    for (const exit of results) tally[Exit.isSuccess(exit) ? exit.value : "failed"]++
    return Effect.all(
      Object.entries(tally).flatMap(([outcome, n]) => (n > 0 ? [count(outcome as Outcome | "failed", n)] : [])),
      { discard: true }
    )
  })

/**
 * @since 0.1.0
 * @category services
 */
export class Inbox extends Context.Service<
  Inbox,
  {
    /**
     * Inside one transaction: insert the processed-message record for `key`, then run `work`.
     * A duplicate key returns `"already_processed"` without running `work`; a key older than the
     * deduplication window returns `"expired"` without running it or writing. When `work` (or the
     * insert, or the commit) fails, dies or is interrupted, the transaction rolls back — the record
     * with it, so a retry runs the work again — and the failure propagates unchanged.
     */
    readonly processOnce: <E, R>(
      key: ProcessedKey,
      work: Effect.Effect<unknown, E, R>
    ) => Effect.Effect<Outcome, E | StoreError, R>
    /**
     * `processOnce` for many messages in ONE transaction: records every key with one statement
     * (`InboxStore.recordBatch`), runs the work of the newly recorded ones in order, commits once.
     * Returns one `Exit` per entry, in order: `"processed"`, `"already_processed"`, `"expired"`,
     * or the failure of that message (typed error, or the defect of its work). With
     * `stopAtFailure` an `"expired"` entry ends the results like a failure: the entries after it
     * are not run (nor recorded).
     *
     * Failure isolation: when the work of entry `i` fails, the transaction rolls back — nothing of
     * the batch commits half-way — and the batch is redone around it: entries before `i` in a new
     * batch (their work runs again), entry `i` reported with its failure (not recorded, so a retry
     * runs it again), entries after `i` in another batch (unless `stopAtFailure`). When the
     * batch fails as a whole (`BEGIN`, the record statement, `COMMIT`), each entry is retried as
     * its own `processOnce`, so a lost commit is told apart per message. Interruption rolls back
     * and propagates. Run it outside a transaction: nested in one, it joins it and cannot isolate
     * a failing entry (no `Transactor` turns nested calls into savepoints;
     * `PgTransactor` then rolls the outer transaction back rather than commit half of it).
     */
    readonly processBatch: <E, R>(
      entries: ReadonlyArray<Entry<E, R>>,
      options?: BatchOptions
    ) => Effect.Effect<ReadonlyArray<Exit.Exit<Outcome, E | StoreError>>, never, R>
  }
>()("@effect-outbox/core/Inbox") {
  /**
   * Built from the `Transactor` and the `InboxStore` of the same database.
   *
   * @since 0.1.0
   * @category layers
   */
  static readonly layer: Layer.Layer<Inbox, never, Transactor | InboxStore> = Layer.effect(Inbox)(
    Effect.gen(function* () {
      const transactor = yield* Transactor
      const store = yield* InboxStore

      const once = <E, R>(key: ProcessedKey, work: Effect.Effect<unknown, E, R>) =>
        transactor.withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const recorded = yield* store.record(key, now)
            if (recorded === "duplicate") return "already_processed" as const
            if (recorded === "expired") return "expired" as const
            yield* work
            return "processed" as const
          })
        )

      // One try of a whole batch in one transaction. A failing work is tagged with its index; with
      // `stopAtFailure` an expired entry is too (the entries after it must not commit before it).
      const tryBatch = <E, R>(entries: ReadonlyArray<Entry<E, R>>, stopAtFailure: boolean) =>
        transactor.withTransaction(
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const recorded = yield* store.recordBatch(
              entries.map((entry) => entry.key),
              now
            )
            const expiredAt = stopAtFailure ? recorded.indexOf("expired") : -1
            if (expiredAt >= 0) return yield* Effect.fail(new ExpiredAt(expiredAt))
            for (let i = 0; i < entries.length; i++) {
              if (recorded[i] !== "recorded") continue
              yield* Effect.catchCause(
                entries[i]!.work,
                (cause): Effect.Effect<never, E | FailedAt> =>
                  Cause.hasInterrupts(cause) ? Effect.failCause(cause) : Effect.fail(new FailedAt(i, cause))
              )
            }
            return recorded.map(outcomeOf)
          })
        )

      type Results<E> = Array<Exit.Exit<Outcome, E | StoreError>>
      // A batch that stopped at a failure or an expired entry before its end.
      const stopped = <E>(results: Results<E>, size: number) => {
        const last = results.at(-1)
        return results.length < size || (last !== undefined && (Exit.isFailure(last) || last.value === "expired"))
      }

      const batch = <E, R>(
        entries: ReadonlyArray<Entry<E, R>>,
        stopAtFailure: boolean
      ): Effect.Effect<Results<E>, never, R> =>
        Effect.gen(function* () {
          if (entries.length === 0) return []
          const exit = yield* Effect.exit(tryBatch(entries, stopAtFailure))
          if (Exit.isSuccess(exit)) return exit.value.map((outcome) => Exit.succeed(outcome))
          if (Cause.hasInterrupts(exit.cause)) return yield* interrupted(exit.cause)
          const error = Cause.findErrorOption(exit.cause)
          if (error._tag === "Some" && error.value instanceof ExpiredAt) {
            // Nothing committed: the entries before it in a batch of their own, then it, then stop.
            const before = yield* batch(entries.slice(0, error.value.index), stopAtFailure)
            return stopped(before, error.value.index) ? before : [...before, Exit.succeed("expired" as const)]
          }
          if (error._tag === "Some" && error.value instanceof FailedAt) {
            // Redo around the failing entry: the entries before it commit in a batch of their own.
            const at = error.value.index
            const before = yield* batch(entries.slice(0, at), stopAtFailure)
            if (stopAtFailure && stopped(before, at)) return before
            const own = Exit.failCause(error.value.cause as Cause.Cause<E>)
            if (stopAtFailure) return [...before, own]
            return [...before, own, ...(yield* batch(entries.slice(at + 1), stopAtFailure))]
          }
          // The batch failed as a whole (begin, record, commit): each entry on its own.
          const results: Results<E> = []
          for (const entry of entries) {
            const one = yield* Effect.exit(once(entry.key, entry.work))
            if (Exit.isFailure(one) && Cause.hasInterrupts(one.cause)) return yield* interrupted(one.cause)
            results.push(one)
            if (stopAtFailure && (Exit.isFailure(one) || one.value === "expired")) break
          }
          return results
        })

      return {
        processOnce: <E, R>(key: ProcessedKey, work: Effect.Effect<unknown, E, R>) =>
          once(key, work).pipe(
            Effect.tap((outcome) => count(outcome)),
            Effect.tapError(() => count("failed")),
            // No stack trace: it would only name this line, and capturing it costs about as much
            // Node CPU as the rest of the span (processOnce runs once per consumed message).
            runningSpan(Telemetry.spans.inboxProcessOnce, {
              attributes: { "outbox.consumer": key.consumer, "outbox.identity": key.identity }
            })
          ),
        processBatch: <E, R>(entries: ReadonlyArray<Entry<E, R>>, options?: BatchOptions) =>
          batch(entries, options?.stopAtFailure ?? false).pipe(
            Effect.tap(countAll),
            runningSpan(Telemetry.spans.inboxProcessBatch, { attributes: { "outbox.batch_size": entries.length } })
          )
      }
    })
  )
}

// An interrupted batch stops as it was interrupted; the cause is rethrown whole.
const interrupted = (cause: Cause.Cause<unknown>): Effect.Effect<never> => Effect.failCause(cause as Cause.Cause<never>)

const outcomeOf = (recorded: RecordOutcome): Outcome =>
  recorded === "recorded" ? "processed" : recorded === "duplicate" ? "already_processed" : "expired"

/** A batch stopping at its failures rolled back at entry `index`, older than the window. */
class ExpiredAt {
  readonly index: number
  constructor(index: number) {
    this.index = index
  }
}

/** A batch's transaction failed because the work of entry `index` did. */
class FailedAt {
  readonly index: number
  readonly cause: Cause.Cause<unknown>
  constructor(index: number, cause: Cause.Cause<unknown>) {
    this.index = index
    this.cause = cause
  }
}

/**
 * `Inbox.processOnce` through the service in context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const processOnce = <E, R>(
  key: ProcessedKey,
  work: Effect.Effect<unknown, E, R>
): Effect.Effect<Outcome, E | StoreError, Inbox | R> => Inbox.use((inbox) => inbox.processOnce(key, work))

/**
 * `Inbox.processBatch` through the service in context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const processBatch = <E, R>(
  entries: ReadonlyArray<Entry<E, R>>,
  options?: BatchOptions
): Effect.Effect<ReadonlyArray<Exit.Exit<Outcome, E | StoreError>>, never, Inbox | R> =>
  Inbox.use((inbox) => inbox.processBatch(entries, options))
