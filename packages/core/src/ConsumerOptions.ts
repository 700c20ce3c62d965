/**
 * A consumer's options and what its handler receives (`Consumer.Options`, `Consumer.Message`):
 * a module of their own so the consumer's internals can read them without importing `Consumer`.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import type { ConsumerRecord } from "./ConsumerSource.ts"
import type * as Inbox from "./Inbox.ts"
import type * as Classify from "./internal/consumer/classify.ts"
import type * as PayloadCodec from "./PayloadCodec.ts"

/**
 * What the handler receives: the decoded payload, the record, its key and event id, the
 * idempotency key for outside effects, and the try number.
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
 * The consumer's options: group, topics, schema and handler, then retries, dead letters,
 * parking, lifecycle, transaction mode and shutdown (each documented on its field).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<S extends Schema.Top, E, R> {
  /** The consumer group; also the inbox's consumer name. */
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  /** The payload's schema; payloads are its JSON unless `codec` says otherwise. */
  readonly schema: S
  /**
   * The payload's wire format (default `PayloadCodec.json(schema)`); `Topic.consumer` passes the
   * topic's. A payload it cannot decode is dead-lettered at once (`PayloadDecodeError`).
   */
  readonly codec?: PayloadCodec.PayloadCodec<S, unknown, R | S["DecodingServices"]>
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
  /**
   * A number: partitions processed at the same time (default 8), each one record at a time in
   * offset order. `{ by: "key", perPartition }`: key-ordered concurrency inside each partition
   * (see {@link KeyConcurrency}).
   */
  readonly concurrency?: number | KeyConcurrency
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
 * Key-ordered concurrency inside a partition: up to `perPartition` handlers run at once on a
 * partition, at most one per key, each key's records in offset order (records without a key
 * share one lane); a slow or retrying key holds back only its own successors. Order across keys
 * is not kept. At most `maxHeld` records of a partition wait in memory (default
 * `max(16 × perPartition, 256)`); then the partition stops fetching until records finish. The
 * committed offset stays the lowest unfinished one, so a crash redelivers what finished above it
 * and the inbox keeps those effects once. Partitions are not limited by a count here: a member
 * runs up to `perPartition` handlers on each partition it owns.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyConcurrency {
  readonly by: "key"
  readonly perPartition: number
  readonly maxHeld?: number
}
