/**
 * `inspect`: one event's row, its recorded transitions and the consumers that processed it.
 *
 * @since 0.1.0
 */
import type { OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { type HistoryEntry, type ProcessedBy, ReadModel } from "@effect-outbox/core/ReadModel"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { OperatorError, parseId } from "./OperatorError.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Inspection {
  readonly message: OutboxMessage
  /** The payload as text when it is valid UTF-8, else base64. */
  readonly payload: { readonly encoding: "utf8" | "base64"; readonly value: string }
  readonly history: ReadonlyArray<HistoryEntry>
  readonly processedBy: ReadonlyArray<ProcessedBy>
}

/**
 * One event: its row (status, attempts, lease, receipt, last error), its recorded transitions
 * and the consumers that processed it.
 *
 * @since 0.1.0
 * @category inspect
 */
export const inspect = (id: string) =>
  Effect.gen(function* () {
    const eventId = yield* parseId(id)
    const store = yield* OutboxStore
    const readModel = yield* ReadModel
    const row = yield* store.get(eventId)
    if (Option.isNone(row)) return yield* new OperatorError({ reason: `no outbox event with id ${eventId}` })
    let payload: Inspection["payload"]
    try {
      payload = { encoding: "utf8", value: new TextDecoder("utf-8", { fatal: true }).decode(row.value.payload) }
    } catch {
      payload = { encoding: "base64", value: Buffer.from(row.value.payload).toString("base64") }
    }
    return {
      message: row.value,
      payload,
      history: yield* readModel.history(eventId),
      processedBy: yield* readModel.processedBy(eventId)
    } satisfies Inspection
  })
