/**
 * The broker-facing publishing port.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Result from "effect/Result"
import type { PublishError } from "./Errors.ts"
import type { EventId, Headers, PublishReceipt } from "./OutboxMessage.ts"

/**
 * One record to publish. `headers` already contain `event-id` (and `traceparent` when traced).
 *
 * @since 0.1.0
 * @category models
 */
export interface PublishRequest {
  readonly id: EventId
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: Headers
  readonly payload: Uint8Array
  /**
   * Whether the record gets an `event-id: id` header (default `true`). `false` publishes
   * `headers` as they are: a dead letter and its replay keep the original's headers, and a
   * record that had no event id must not get a fresh one.
   */
  readonly writeEventId?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export type PublishOutcome = Result.Result<PublishReceipt, PublishError>

/**
 * @since 0.1.0
 * @category services
 */
export class Publisher extends Context.Service<
  Publisher,
  {
    /**
     * Publishes a batch in as few broker round trips as the client allows (never one awaited send
     * per record). Returns one outcome per request, in request order; a failure of the whole batch
     * is reported as that failure for every request. Within a partition, records are appended in
     * request order and retries never reorder them (idempotent producer).
     */
    readonly publish: (requests: ReadonlyArray<PublishRequest>) => Effect.Effect<ReadonlyArray<PublishOutcome>>
  }
>()("@effect-outbox/core/Publisher") {}
