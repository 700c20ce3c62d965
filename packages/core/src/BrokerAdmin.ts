/**
 * Broker administration: topics and partition counts (R3.3, R6.2).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { BrokerAdminError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class BrokerAdmin extends Context.Service<BrokerAdmin, {
  /** The topic's partition count, `None` when the topic does not exist. */
  readonly partitionCount: (topic: string) => Effect.Effect<Option.Option<number>, BrokerAdminError>
  /** Creates the topic when missing; an existing topic is left as it is. Safe under races. */
  readonly ensureTopic: (request: {
    readonly topic: string
    readonly partitions: number
    readonly configs?: Readonly<Record<string, string>>
  }) => Effect.Effect<void, BrokerAdminError>
  /**
   * Grows the topic to at least `partitions` partitions and returns the resulting count. Never
   * shrinks; a concurrent grow to the same or a larger count is not an error.
   */
  readonly growPartitions: (topic: string, partitions: number) => Effect.Effect<number, BrokerAdminError>
}>()("@effect-outbox/core/BrokerAdmin") {}
