/**
 * What a Kafka client must provide for the shared layer to run on it: how its errors name
 * themselves, and a few broker calls as plain promises (the shared layer retries, times and maps
 * them). Producing records has its own seam (`Publisher.ProduceDriver`), and so do the parts
 * whose shape depends on the client: its consumer-group handoff, its transactional producer, its
 * probe.
 *
 * @since 0.1.0
 */
import type { BrokerAdminError } from "@effect-outbox/core/Errors"
import type * as Effect from "effect/Effect"
import type { Protocol } from "./KafkaProtocol.ts"

/**
 * A topic as metadata shows it: its partition count and each partition's leader (by partition
 * id; `-1` when the client does not say).
 *
 * @since 0.1.0
 * @category models
 */
export interface TopicLayout {
  readonly partitions: number
  readonly leaders: ReadonlyArray<number>
  /**
   * Partitions the answer names without a leader (their replicas' brokers are down): records
   * for them wait, the topic's other partitions are sent. For a client whose metadata call
   * fails outright on such a partition, the driver says nothing and the publisher learns it
   * from failed sends.
   */
  readonly leaderless?: ReadonlyArray<number> | undefined
  /**
   * Set by the publisher, not the driver: the last good answer, used because a fresh read
   * failed with an outage (the topic has a leaderless partition, or the broker asked is away).
   */
  readonly stale?: boolean | undefined
}

/**
 * One partition's committed offset in a group (`null`: none) and the log's bounds.
 *
 * @since 0.1.0
 * @category models
 */
export interface PartitionOffsets {
  readonly partition: number
  readonly committed: string | null
  readonly start: string
  readonly end: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaDriver {
  readonly brokers: ReadonlyArray<string>
  /** The client's errors, classified (see `KafkaProtocol.make`). */
  readonly protocol: Protocol
  /** Fresh metadata of one topic: `undefined` or an unknown-topic error when it does not exist. */
  readonly metadata: (topic: string) => Promise<TopicLayout | undefined>
  readonly createTopic: (request: {
    readonly topic: string
    readonly partitions: number
    readonly replicationFactor: number
    readonly configs: ReadonlyArray<{ readonly name: string; readonly value: string }>
  }) => Promise<unknown>
  readonly createPartitions: (topic: string, count: number) => Promise<unknown>
  /** One config value of a topic (`max.message.bytes`, …), `undefined` when not reported. */
  readonly topicConfig: (topic: string, name: string) => Promise<string | undefined>
  /** The group's committed offsets and each partition's log bounds, per topic. */
  readonly groupOffsets: (
    groupId: string,
    topics: ReadonlyArray<{ readonly topic: string; readonly partitions: number }>
  ) => Promise<ReadonlyArray<ReadonlyArray<PartitionOffsets>>>
  /** Sets a member-less group's committed offsets. */
  readonly commitGroupOffsets: (
    groupId: string,
    topic: string,
    partitions: ReadonlyArray<{ readonly partition: number; readonly offset: string }>
  ) => Promise<unknown>
  /** Every topic, asked once (no retries of its own beyond the client's few): the caller bounds and retries. */
  readonly listTopics: Effect.Effect<ReadonlyArray<string>, BrokerAdminError>
}
