/**
 * A request an operator must correct, and the parsing every operation shares.
 *
 * @since 0.1.0
 */
import { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * A request an operator must correct (missing filter, unknown id, bad value).
 *
 * @since 0.1.0
 * @category errors
 */
export class OperatorError extends Schema.TaggedError<OperatorError>()("OperatorError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/**
 * An event id as an operator typed it (any case, surrounding blanks), or an `OperatorError`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseId = (id: string): Effect.Effect<EventId, OperatorError> =>
  Schema.decodeUnknownEffect(EventId)(id.trim().toLowerCase()).pipe(
    Effect.mapError(() => new OperatorError({ reason: `"${id}" is not an event id (a UUID)` }))
  )
