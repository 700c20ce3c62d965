/**
 * The idempotent consumer's core (R4.1–R4.3): `processOnce` records "this consumer handled this
 * message" and runs the work **in one database transaction**, so the effect and its dedup record
 * commit together or not at all.
 *
 * Identities say what "the same message" means:
 * - event-id identity `event:<event-id>` (the article's): the same event republished at another
 *   offset (relay retry, DLT replay) is still recognised. The default.
 * - offset identity `offset:<topic>/<partition>/<offset>` (the seed's): one Kafka record is
 *   handled once; a republish is new work. The fallback for records without an `event-id`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type { OutboxStoreError } from "./Errors.ts"
import { InboxStore, type ProcessedKey } from "./InboxStore.ts"
import { EVENT_ID_HEADER, type Headers } from "./OutboxMessage.ts"
import { Transactor } from "./Transactor.ts"

/**
 * What `processOnce` did: ran the work (and committed it with its record) or found the record
 * already there and ran nothing.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "processed" | "already_processed"

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
 * The identity of a record under `strategy`. An empty `event-id` header counts as absent.
 *
 * @since 0.1.0
 * @category identities
 */
export const identityOf = (record: RecordCoordinates, strategy: IdentityStrategy = "event-id"): string => {
  const eventId = record.headers[EVENT_ID_HEADER]
  return strategy === "event-id" && eventId !== undefined && eventId !== ""
    ? eventIdentity(eventId)
    : offsetIdentity(record)
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
): ProcessedKey => ({
  consumer,
  identity: identityOf(record, strategy)
})

/**
 * Messages handled by `processOnce`, with attribute `outcome` (`processed`, `already_processed`,
 * `failed`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const processedTotal = Metric.counter("outbox_inbox_processed_total", {
  description: "Messages handled by Inbox.processOnce, by outcome",
  incremental: true
})

const count = (outcome: Outcome | "failed") => Metric.update(Metric.withAttributes(processedTotal, { outcome }), 1)

/**
 * @since 0.1.0
 * @category services
 */
export class Inbox extends Context.Service<
  Inbox,
  {
    /**
     * Inside one transaction: insert the processed-message record for `key`, then run `work`.
     * A duplicate key returns `"already_processed"` without running `work`. When `work` (or the
     * insert, or the commit) fails, dies or is interrupted, the transaction rolls back — the record
     * with it, so a retry runs the work again — and the failure propagates unchanged (R4.1, R4.2).
     */
    readonly processOnce: <E, R>(
      key: ProcessedKey,
      work: Effect.Effect<unknown, E, R>
    ) => Effect.Effect<Outcome, E | OutboxStoreError, R>
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
      return {
        processOnce: <E, R>(key: ProcessedKey, work: Effect.Effect<unknown, E, R>) =>
          transactor
            .withTransaction(
              Effect.gen(function* () {
                const now = yield* Clock.currentTimeMillis
                const recorded = yield* store.record(key, now)
                if (recorded === "duplicate") return "already_processed" as const
                yield* work
                return "processed" as const
              })
            )
            .pipe(
              Effect.tap(count),
              Effect.tapError(() => count("failed")),
              Effect.withSpan("outbox.inbox.process_once", {
                attributes: { "outbox.consumer": key.consumer, "outbox.identity": key.identity }
              })
            )
      }
    })
  )
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
): Effect.Effect<Outcome, E | OutboxStoreError, Inbox | R> => Inbox.use((inbox) => inbox.processOnce(key, work))
