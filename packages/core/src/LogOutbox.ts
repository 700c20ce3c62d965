/**
 * The `Outbox` service for the log engine: the same validation as the claim engine's, but events
 * go to the log (`LogWriter`) instead of the outbox table, so there is no row to claim, mark or
 * delete. What the log cannot do is refused with a typed error rather than silently dropped:
 * `prequeued` (there is no row to release) and an `availableAt` in the future (the log relay
 * publishes in commit order and never holds an event back).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { EventNotFoundError, OutboxValidationError } from "./Errors.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import type { LogMessage } from "./LogRecord.ts"
import { LogWriter } from "./LogWriter.ts"
import { Outbox, prepare, type Settings, withTransactionOf } from "./Outbox.ts"
import type * as OutboxMessage from "./OutboxMessage.ts"
import * as Telemetry from "./Telemetry.ts"
import { Transactor } from "./Transactor.ts"

/** What the log cannot do: hold an event back, or delay it. */
const logRules = (draft: OutboxMessage.OutboxDraft, index: number, now: number) => {
  if (draft.prequeued === true) {
    return new OutboxValidationError({
      field: `drafts[${index}].prequeued`,
      reason: "the log engine has no row to hold back; use the claim engine (Outbox.layer) for deferred events"
    })
  }
  if (draft.availableAt !== undefined && draft.availableAt > now) {
    return new OutboxValidationError({
      field: `drafts[${index}].availableAt`,
      reason: "the log engine publishes in commit order and cannot delay an event; use the claim engine"
    })
  }
  return undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Settings) =>
  Effect.gen(function* () {
    const writer = yield* LogWriter
    const transactor = yield* Transactor

    // A `LogMessage` is a prepared message without the claim engine's status and availability.
    const toLog = (m: OutboxMessage.NewOutboxMessage): LogMessage => ({
      id: m.id,
      topic: m.topic,
      key: m.key,
      partition: m.partition,
      headers: m.headers,
      payload: m.payload,
      createdAt: m.createdAt
    })
    const emitted = (prepared: Array<OutboxMessage.NewOutboxMessage>) => {
      if (prepared.length === 0) return Effect.succeed([])
      const messages = prepared.map(toLog)
      return transactor.withTransaction(writer.emit(messages)).pipe(
        Effect.andThen(Metric.update(Telemetry.enqueued, messages.length)),
        Effect.map(() => messages.map((message) => message.id))
      )
    }

    // As the claim engine's enqueue (Outbox.ts): plain steps, and a span without a stack trace,
    // which would only name this line; capturing it was 14 µs of node CPU per business
    // transaction under load (the write path is node-bound at 16 clients).
    const enqueue = (drafts: ReadonlyArray<OutboxMessage.OutboxDraft>) =>
      Effect.flatMap(prepare(drafts, settings, logRules), emitted).pipe(
        runningSpan(Telemetry.spans.enqueue, { attributes: { "outbox.count": drafts.length, "outbox.engine": "log" } })
      )

    // Nothing is ever PREQUEUED here, so every id is unknown to `release`.
    const release = (ids: ReadonlyArray<OutboxMessage.EventId>) =>
      ids.length === 0 ? Effect.void : Effect.fail(new EventNotFoundError({ id: ids[0]! }))

    // Enqueue requires the caller's transaction (Outbox.InTransaction), as on the claim engine.
    return Outbox.of({ withTransaction: withTransactionOf(transactor), enqueue, release })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (settings: Settings = {}): Layer.Layer<Outbox, never, LogWriter | Transactor> =>
  Layer.effect(Outbox)(make(settings))
