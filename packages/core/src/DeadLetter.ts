/**
 * Dead letters: what a poison record looks like on its dead-letter topic, how the consumer
 * writes it, and the operator's `replay` that republishes selected dead letters to their
 * original topic.
 *
 * A dead letter is the original record — same key, same headers (the `event-id` among them),
 * same payload bytes — plus `dlt-*` headers saying where it came from and why it failed.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { BrokerAdmin } from "./BrokerAdmin.ts"
import type { ConsumerRecord } from "./ConsumerSource.ts"
import * as DeadLetterDepth from "./DeadLetterDepth.ts"
import type { ConsumerSourceError, PublishError } from "./Errors.ts"
import {
  EVENT_ID_HEADER,
  type Headers,
  isEventId,
  makeEventId,
  ORIGINAL_RECORD_HEADER,
  ORIGINAL_TIMESTAMP_HEADER
} from "./OutboxMessage.ts"
import { Publisher, type PublishRequest } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"
import { TopicReader } from "./TopicReader.ts"

/**
 * The headers a dead letter carries besides the original ones. All values are strings.
 *
 * @since 0.1.0
 * @category constants
 */
export const headers = {
  originalTopic: "dlt-original-topic",
  originalPartition: "dlt-original-partition",
  originalOffset: "dlt-original-offset",
  originalTimestamp: "dlt-original-timestamp",
  /** The error's `_tag` (or constructor name). */
  errorClass: "dlt-error-class",
  errorMessage: "dlt-error-message",
  /** How many times the handler was tried before giving up. */
  attempts: "dlt-attempts",
  /** `transient` (retries exhausted) or `permanent`. */
  classification: "dlt-classification",
  consumerGroup: "dlt-consumer-group",
  deadLetteredAt: "dlt-dead-lettered-at",
  /** Set by `replay` on the republished record: 1 for the first replay, then 2, … */
  replayAttempt: "dlt-replay-attempt"
} as const

const DIAGNOSTIC_PREFIX = "dlt-"

/**
 * The default dead-letter topic of `topic`: `<topic>.DLT`.
 *
 * @since 0.1.0
 * @category naming
 */
export const defaultTopic = (topic: string): string => `${topic}.DLT`

export {
  /**
   * The dead-letter topic refused the record (or kept failing): the consumer stops rather than
   * lose the record. Create the topic, or fix the broker, and restart; nothing was committed past it.
   *
   * @since 0.1.0
   * @category errors
   */
  DeadLetterPublishError
} from "./Errors.ts"

/**
 * The class name of an error, for the `dlt-error-class` header and the metric.
 *
 * @since 0.1.0
 * @category errors
 */
export const errorClass = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { readonly _tag?: unknown })._tag
    if (typeof tag === "string") return tag
    const name = (error as { readonly constructor?: { readonly name?: unknown } }).constructor?.name
    if (typeof name === "string" && name !== "Object") return name
  }
  return typeof error
}

/**
 * A readable message for any error, truncated so one header never dominates the record.
 *
 * @since 0.1.0
 * @category errors
 */
export const errorMessage = (error: unknown): string => {
  const text =
    typeof error === "object" && error !== null && typeof (error as Error).message === "string"
      ? (error as Error).message
      : String(error)
  return text.length > 1000 ? `${text.slice(0, 1000)}…` : text
}

/**
 * Why a record is dead-lettered.
 *
 * @since 0.1.0
 * @category models
 */
export interface Failure {
  readonly error: unknown
  readonly attempts: number
  readonly classification: "transient" | "permanent"
  readonly consumerGroup: string
}

/**
 * The publish request that dead-letters `record` to `deadLetterTopic`: original key, headers and
 * payload, plus the `dlt-*` headers. The partition is left to the broker's partitioner (by key).
 * A record without a valid `event-id` gets a fresh request id, but no `event-id` header is
 * invented for it (`writeEventId: false`: the headers go out as they are).
 *
 * @since 0.1.0
 * @category constructors
 */
export const toPublishRequest = (
  record: ConsumerRecord,
  deadLetterTopic: string,
  failure: Failure
): Effect.Effect<PublishRequest> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const id = yield* requestId(record.headers)
    const diagnostics: Headers = {
      [headers.originalTopic]: record.topic,
      [headers.originalPartition]: String(record.partition),
      [headers.originalOffset]: record.offset,
      [headers.originalTimestamp]: String(record.timestamp),
      [headers.errorClass]: errorClass(failure.error),
      [headers.errorMessage]: errorMessage(failure.error),
      [headers.attempts]: String(failure.attempts),
      [headers.classification]: failure.classification,
      [headers.consumerGroup]: failure.consumerGroup,
      [headers.deadLetteredAt]: String(now)
    }
    return {
      id,
      topic: deadLetterTopic,
      key: record.key,
      partition: null,
      headers: { ...withoutDiagnostics(record.headers), ...diagnostics },
      payload: record.value,
      writeEventId: false
    }
  })

const requestId = (recordHeaders: Headers) => {
  const value = recordHeaders[EVENT_ID_HEADER]
  return value !== undefined && isEventId(value) ? Effect.succeed(value) : makeEventId
}

// Diagnostics of an earlier dead-lettering are replaced, never stacked: the headers describe the
// latest failure. The replay counter is kept so replays keep counting up.
const withoutDiagnostics = (recordHeaders: Headers): Headers =>
  Object.fromEntries(
    Object.entries(recordHeaders).filter(
      ([name]) => !name.startsWith(DIAGNOSTIC_PREFIX) || name === headers.replayAttempt
    )
  )

/**
 * A record read from a dead-letter topic, with its diagnostics parsed.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeadLetter {
  /** The record as it sits on the dead-letter topic. */
  readonly record: ConsumerRecord
  readonly originalTopic: string
  readonly originalPartition: number
  readonly originalOffset: string
  readonly eventId: string | null
  readonly errorClass: string
  readonly errorMessage: string
  readonly attempts: number
  readonly consumerGroup: string
  readonly deadLetteredAt: number
  /** How many times this record was replayed before it was dead-lettered this time. */
  readonly replayAttempt: number
}

/**
 * Reads the diagnostics of a dead-letter record; `None` for a record that is not a dead letter
 * (no `dlt-original-topic` header).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (record: ConsumerRecord): Option.Option<DeadLetter> => {
  const h = record.headers
  const originalTopic = h[headers.originalTopic]
  if (originalTopic === undefined) return Option.none()
  const int = (value: string | undefined, fallback: number) => {
    const n = value === undefined ? Number.NaN : Number(value)
    return Number.isFinite(n) ? n : fallback
  }
  return Option.some({
    record,
    originalTopic,
    originalPartition: int(h[headers.originalPartition], -1),
    originalOffset: h[headers.originalOffset] ?? "",
    eventId: h[EVENT_ID_HEADER] ?? null,
    errorClass: h[headers.errorClass] ?? "unknown",
    errorMessage: h[headers.errorMessage] ?? "",
    attempts: int(h[headers.attempts], 0),
    consumerGroup: h[headers.consumerGroup] ?? "",
    deadLetteredAt: int(h[headers.deadLetteredAt], 0),
    replayAttempt: int(h[headers.replayAttempt], 0)
  })
}

/**
 * The record `replay` publishes for a dead letter: original key, payload and headers (the
 * `event-id` kept, so consumers still deduplicate, and none invented for a record that had none),
 * the `dlt-*` diagnostics removed, `dlt-replay-attempt` counted up, and the original's
 * coordinates in `outbox-original-record` (kept from an earlier replay), so a group deduplicating
 * by offset identity sees the replay as the record it handled. Back on the original partition when replayed to the original
 * topic (explicitly routed partitions stay on their route); else by key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toReplayRequest = (deadLetter: DeadLetter, to?: string): Effect.Effect<PublishRequest> =>
  Effect.map(requestId(deadLetter.record.headers), (id) => {
    const original = Object.fromEntries(
      Object.entries(deadLetter.record.headers).filter(([name]) => !name.startsWith(DIAGNOSTIC_PREFIX))
    )
    const topic = to ?? deadLetter.originalTopic
    const known = deadLetter.originalPartition >= 0 && deadLetter.originalOffset !== ""
    const originalRecord =
      original[ORIGINAL_RECORD_HEADER] ??
      (known ? `${deadLetter.originalTopic}/${deadLetter.originalPartition}/${deadLetter.originalOffset}` : undefined)
    // The original's broker time travels with its coordinates: the inbox keeps records by time.
    const originalTimestamp =
      original[ORIGINAL_TIMESTAMP_HEADER] ?? deadLetter.record.headers[headers.originalTimestamp]
    return {
      id,
      topic,
      key: deadLetter.record.key,
      partition:
        topic === deadLetter.originalTopic && deadLetter.originalPartition >= 0 ? deadLetter.originalPartition : null,
      headers: {
        ...original,
        ...(originalRecord === undefined ? {} : { [ORIGINAL_RECORD_HEADER]: originalRecord }),
        ...(originalRecord === undefined || originalTimestamp === undefined
          ? {}
          : { [ORIGINAL_TIMESTAMP_HEADER]: originalTimestamp }),
        [headers.replayAttempt]: String(deadLetter.replayAttempt + 1)
      },
      payload: deadLetter.record.value,
      writeEventId: false
    }
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface ReplayOptions {
  /** The dead-letter topic to read, e.g. `"orders.DLT"`. */
  readonly from: string
  /** Which dead letters to republish; all when absent. */
  readonly filter?: (deadLetter: DeadLetter) => boolean
  /** Republish here instead of each dead letter's original topic. */
  readonly to?: string
  /** Records per publish call (default 100). */
  readonly batchSize?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ReplayResult {
  /** Dead letters republished. */
  readonly replayed: ReadonlyArray<DeadLetter>
  /** Records read but not selected (filtered out, or not dead letters). */
  readonly skipped: number
  /** Dead letters the broker refused; run the replay again (consumers dedupe by event id). */
  readonly failed: ReadonlyArray<{ readonly deadLetter: DeadLetter; readonly error: PublishError }>
}

/**
 * Republishes the dead letters of `from` that pass `filter` to their original topic (or `to`),
 * in the dead-letter topic's order per partition. The dead letters stay on the DLT (a
 * topic is append-only); replaying twice publishes twice, which is harmless: the event id is
 * kept and the consumer's event-id identity deduplicates. With `BrokerAdmin` in context, the
 * replay position behind the dead-letter depth moves over what was replayed (`DeadLetterDepth`).
 *
 * @since 0.1.0
 * @category operations
 */
export const replay = (
  options: ReplayOptions
): Effect.Effect<ReplayResult, ConsumerSourceError, TopicReader | Publisher> =>
  Effect.gen(function* () {
    const reader = yield* TopicReader
    const publisher = yield* Publisher
    const replayedLetters: Array<DeadLetter> = []
    const failed: Array<{ deadLetter: DeadLetter; error: PublishError }> = []
    let skipped = 0
    yield* reader.read(options.from).pipe(
      Stream.grouped(options.batchSize ?? 100),
      Stream.runForEach((records) =>
        Effect.gen(function* () {
          const selected: Array<DeadLetter> = []
          for (const record of records) {
            const deadLetter = parse(record)
            if (Option.isSome(deadLetter) && (options.filter === undefined || options.filter(deadLetter.value))) {
              selected.push(deadLetter.value)
            } else skipped++
          }
          if (selected.length === 0) return
          const requests = yield* Effect.forEach(selected, (deadLetter) => toReplayRequest(deadLetter, options.to))
          const outcomes = yield* publisher.publish(requests)
          for (let i = 0; i < selected.length; i++) {
            const outcome = outcomes[i]!
            if (outcome._tag === "Success") {
              replayedLetters.push(selected[i]!)
              yield* Metric.update(
                Metric.withAttributes(Telemetry.deadLettersReplayed, { topic: requests[i]!.topic }),
                1
              )
            } else failed.push({ deadLetter: selected[i]!, error: outcome.failure })
          }
        })
      )
    )
    yield* Effect.logInfo(
      `replayed ${replayedLetters.length} dead letters from ${options.from} (${failed.length} failed, ${skipped} skipped)`
    ).pipe(
      Effect.annotateLogs({ deadLetterTopic: options.from, replayed: replayedLetters.length, failed: failed.length })
    )
    // The replay position behind the dead-letter depth gauge (DeadLetterDepth), when the
    // broker's admin is at hand; a failure to record it is reported, the replay stands.
    yield* Effect.serviceOption(BrokerAdmin).pipe(
      Effect.flatMap((admin) =>
        Option.isNone(admin)
          ? Effect.void
          : DeadLetterDepth.advance(
              options.from,
              replayedLetters.map((letter) => letter.record),
              (record) => record.headers[headers.originalTopic] !== undefined
            ).pipe(Effect.provideService(BrokerAdmin, admin.value))
      ),
      Effect.catch((error) =>
        Effect.logWarning(`replayed, but the replay position of ${options.from} was not recorded: ${error.message}`)
      )
    )
    return { replayed: replayedLetters, skipped, failed }
  }).pipe(Effect.withSpan(Telemetry.spans.deadLetterReplay, { attributes: { "outbox.dlt": options.from } }))
