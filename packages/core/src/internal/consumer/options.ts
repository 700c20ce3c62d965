/**
 * What the record runner makes of the consumer's options (`Consumer.Options`): their defaults,
 * the payload decoder, and the handler's work for one record.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import * as ClaimCheck from "../../ClaimCheck.ts"
import type { Message, Options } from "../../ConsumerOptions.ts"
import type { ConsumerRecord } from "../../ConsumerSource.ts"
import * as DeadLetter from "../../DeadLetter.ts"
import { HandlerDefectError, PayloadDecodeError } from "../../Errors.ts"
import * as Inbox from "../../Inbox.ts"
import { InboxStore } from "../../InboxStore.ts"
import { OutboxStore } from "../../OutboxStore.ts"
import * as PayloadCodec from "../../PayloadCodec.ts"
import { Publisher } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"
import * as Classify from "./classify.ts"
import * as RecordRunner from "./record.ts"

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

/**
 * The record runner's settings: the options, their defaults, and the services in context. The
 * default schedules are `Consumer`'s, resolved there.
 */
export const recordSettings = <S extends Schema.Top, E, R>(
  options: Options<S, E, R>,
  schedules: {
    readonly retry: Schedule.Schedule<unknown, unknown>
    readonly infrastructure: Schedule.Schedule<unknown, unknown>
  }
) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<R | S["DecodingServices"]>()
    const provideUser = <A, E2>(effect: Effect.Effect<A, E2, R | S["DecodingServices"]>) =>
      Effect.provideContext(effect, context)
    const codec = options.codec ?? PayloadCodec.json(options.schema)
    const claimChecks = yield* Effect.serviceOption(ClaimCheck.ClaimCheckStore)
    return {
      groupId: options.groupId,
      identity: options.identity ?? "event-id",
      onExpired: options.onExpired ?? (yield* DefaultExpiredPolicy),
      lifecycle: (options.lifecycle ?? true) && !(yield* NoOutboxRows),
      maxAttempts: Math.max(1, options.maxAttempts ?? 5),
      classify: options.classify ?? Classify.defaultClassifier,
      isInfrastructure: options.isInfrastructure ?? (yield* Classify.DefaultInfrastructureTest),
      retrySchedule: schedules.retry,
      infrastructureRetry: schedules.infrastructure,
      deadLetterTopic: options.deadLetterTopic ?? DeadLetter.defaultTopic,
      decode: (record) =>
        // A payload stored aside is read back first (the store's failures are retried).
        Effect.flatMap(ClaimCheck.rehydrate(record, claimChecks), (payload) =>
          codec.decode(record.topic, payload).pipe(
            Effect.mapError(
              (error) =>
                new PayloadDecodeError({
                  topic: record.topic,
                  partition: record.partition,
                  offset: record.offset,
                  reason: error.format === "json" ? error.reason : `${error.format}: ${error.reason}`
                })
            ),
            provideUser
          )
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
