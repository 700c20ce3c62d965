/**
 * The `Outbox` service for the log engine: the same validation as the claim engine's, but events
 * go to the log (`LogWriter`) instead of the outbox table, so there is no row to claim, mark or
 * delete. What the log cannot do is refused with a typed error rather than silently dropped:
 * `prequeued` (there is no row to release) and an `availableAt` in the future (the log relay
 * publishes in commit order and never holds an event back).
 *
 * @since 0.3.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { EventNotFoundError, OutboxValidationError } from "./Errors.ts"
import type { LogMessage } from "./LogRecord.ts"
import { LogWriter } from "./LogWriter.ts"
import { Outbox, type Settings, validateDraft, validateRecordSize } from "./Outbox.ts"
import * as OutboxMessage from "./OutboxMessage.ts"
import * as Telemetry from "./Telemetry.ts"
import { Transactor } from "./Transactor.ts"

/**
 * @since 0.3.0
 * @category constructors
 */
export const make = (settings: Settings) =>
  Effect.gen(function* () {
    const writer = yield* LogWriter
    const transactor = yield* Transactor

    const enqueue = (drafts: ReadonlyArray<OutboxMessage.OutboxDraft>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const seen = new Set<string>()
        for (let i = 0; i < drafts.length; i++) {
          const draft = drafts[i]!
          const invalid = validateDraft(draft, settings, i)
          if (invalid !== undefined) return yield* invalid
          if (draft.prequeued === true) {
            return yield* new OutboxValidationError({
              field: `drafts[${i}].prequeued`,
              reason: "the log engine has no row to hold back; use the claim engine (Outbox.layer) for deferred events"
            })
          }
          if (draft.availableAt !== undefined && draft.availableAt > now) {
            return yield* new OutboxValidationError({
              field: `drafts[${i}].availableAt`,
              reason: "the log engine publishes in commit order and cannot delay an event; use the claim engine"
            })
          }
          if (draft.id !== undefined) {
            if (seen.has(draft.id.toLowerCase())) {
              return yield* new OutboxValidationError({
                field: `drafts[${i}].id`,
                reason: `${draft.id} appears twice in one batch`
              })
            }
            seen.add(draft.id.toLowerCase())
          }
        }
        if (drafts.length === 0) return []
        const messages: Array<LogMessage> = []
        for (const [index, draft] of drafts.entries()) {
          const id = draft.id ?? (yield* OutboxMessage.makeEventId)
          const headers = yield* Telemetry.injectTraceparent({ ...draft.headers, [OutboxMessage.EVENT_ID_HEADER]: id })
          const tooLarge = validateRecordSize(
            { key: draft.key ?? null, headers, payload: draft.payload },
            settings,
            index
          )
          if (tooLarge !== undefined) return yield* tooLarge
          messages.push({
            id,
            topic: draft.topic,
            key: draft.key ?? null,
            partition: draft.partition ?? null,
            headers,
            payload: draft.payload,
            createdAt: now
          })
        }
        yield* transactor.withTransaction(writer.emit(messages))
        yield* Metric.update(Telemetry.enqueued, messages.length)
        return messages.map((message) => message.id)
      }).pipe(
        Effect.withSpan(Telemetry.spans.enqueue, {
          attributes: { "outbox.count": drafts.length, "outbox.engine": "log" }
        })
      )

    // Nothing is ever PREQUEUED here, so every id is unknown to `release`.
    const release = (ids: ReadonlyArray<OutboxMessage.EventId>) =>
      ids.length === 0 ? Effect.void : Effect.fail(new EventNotFoundError({ id: ids[0]! }))

    return Outbox.of({ enqueue, release })
  })

/**
 * @since 0.3.0
 * @category layers
 */
export const layerWith = (settings: Settings = {}): Layer.Layer<Outbox, never, LogWriter | Transactor> =>
  Layer.effect(Outbox)(make(settings))
