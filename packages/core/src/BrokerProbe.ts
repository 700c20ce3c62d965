/**
 * Asks the broker whether a record already reached it: a timed-out send may have landed.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { ProbeError } from "./Errors.ts"
import type { EventId, PublishReceipt } from "./OutboxMessage.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProbeRequest {
  readonly topic: string
  /** The partition to search; `null` searches every partition of the topic. */
  readonly partition: number | null
  readonly eventId: EventId
  /** Epoch millis: records older than this need not be read. */
  readonly since: number
}

/**
 * Several events of one topic at once (the log relay's takeover window).
 *
 * @since 0.1.0
 * @category models
 */
export interface ProbeManyRequest {
  readonly topic: string
  /** The partition to search; `null` searches every partition of the topic. */
  readonly partition: number | null
  readonly eventIds: ReadonlyArray<EventId>
  /** Epoch millis: records older than this need not be read. */
  readonly since: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class BrokerProbe extends Context.Service<
  BrokerProbe,
  {
    /**
     * The receipt of the record whose `event-id` header equals `eventId`, written at or after
     * `since`, or `None` when the partition holds no such record up to its high watermark.
     */
    readonly find: (request: ProbeRequest) => Effect.Effect<Option.Option<PublishReceipt>, ProbeError>
    /**
     * The receipts of those of `eventIds` the topic holds, written at or after `since`, in one
     * read. Optional: without it the log relay calls `find` once per event.
     */
    readonly findMany?: (request: ProbeManyRequest) => Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError>
  }
>()("@effect-outbox/core/BrokerProbe") {}
