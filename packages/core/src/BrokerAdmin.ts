/**
 * Broker administration: topics and partition counts, and where a consumer group
 * stands on them (consumer lag).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { BrokerAdminError } from "./Errors.ts"

/**
 * Where a consumer group stands on one partition, as the broker stores it. All offsets are
 * int64 decimal strings; `end - committed` is the group's lag in offsets.
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupOffsets {
  readonly topic: string
  readonly partition: number
  /** The group's committed offset (the next one it reads); `null` when it never committed here. */
  readonly committed: string | null
  /** The first offset still in the log (retention moves it forward). */
  readonly start: string
  /**
   * The offset the next record will get: the high watermark (for transactional writes, the last
   * stable offset that read-committed consumers see).
   */
  readonly end: string
}

/**
 * @since 0.1.0
 * @category services
 */
export class BrokerAdmin extends Context.Service<
  BrokerAdmin,
  {
    /**
     * The brokers this admin talks to (`host:port`), for messages. Absent on layers that have no
     * such address (the in-memory broker).
     */
    readonly brokers?: ReadonlyArray<string> | undefined
    /**
     * Every topic on the broker, asked once (no retries beyond the client's single request), so a
     * caller can bound how long it waits: the runtime's start-up check uses it. Optional: a layer
     * without it has its topics left unchecked.
     */
    readonly listTopics?: Effect.Effect<ReadonlyArray<string>, BrokerAdminError> | undefined
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
    /**
     * Every partition of `topics` with the group's committed offset and the log's bounds, read
     * from the broker (not from a live member), so it is true for a group that is stuck, slow or
     * not running. Topics that do not exist are left out.
     */
    readonly groupOffsets: (request: {
      readonly groupId: string
      readonly topics: ReadonlyArray<string>
    }) => Effect.Effect<ReadonlyArray<GroupOffsets>, BrokerAdminError>
    /**
     * Sets a group's committed offsets (the next offset to read) on partitions of `topic`. For
     * a group without live members, such as the dead-letter replay position (`DeadLetterDepth`);
     * a group with members may refuse.
     */
    readonly commitGroupOffsets: (request: {
      readonly groupId: string
      readonly topic: string
      readonly partitions: ReadonlyArray<{ readonly partition: number; readonly offset: string }>
    }) => Effect.Effect<void, BrokerAdminError>
    /**
     * The topic's `retention.ms`: how long the broker keeps its records (`None`: without a time
     * limit). Optional: the durable-parking age check needs it.
     */
    readonly retentionMillis?: ((topic: string) => Effect.Effect<Option.Option<number>, BrokerAdminError>) | undefined
  }
>()("@effect-outbox/core/BrokerAdmin") {}
