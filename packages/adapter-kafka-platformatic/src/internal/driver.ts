/**
 * The @platformatic/kafka client as the Kafka layer's `KafkaDriver`: metadata, topics,
 * partitions, configs and group offsets on the shared admin and the offsets consumer.
 *
 * @internal
 */
import { BrokerAdminError } from "@effect-outbox/core/Errors"
import type { KafkaDriver } from "@effect-outbox/kafka/KafkaDriver"
import { ConfigResourceTypes } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import type { PlatformaticClient } from "../PlatformaticClient.ts"
import { describe, leaves, protocol } from "../PlatformaticErrors.ts"
import * as Leaderless from "./leaderless.ts"

// A failed connection's leaf says only "Connection to host:port failed."; its cause says why
// (ECONNREFUSED, ENOTFOUND, …), which is what an operator acts on.
const withSocketCauses = (error: unknown): string => {
  const causes = leaves(error).flatMap((leaf) => (leaf.cause instanceof Error ? [leaf.cause.message] : []))
  const unique = [...new Set(causes)]
  return unique.length === 0 ? describe(error) : `${describe(error)}: ${unique.join("; ")}`
}

export const make = ({ admin, brokers, offsets }: PlatformaticClient["Service"]): KafkaDriver => ({
  brokers,
  protocol,
  metadata: async (topic) => {
    // Asked once: a partition without a leader fails the whole answer (the client retries it for
    // seconds); the partitions that have one are read from the answer the error carries.
    const answer = await admin.metadata({ topics: [topic], forceUpdate: true, retries: 0 }).catch((error: unknown) => {
      const layout = Leaderless.fromError(error, topic)
      if (layout === undefined) throw error
      return layout
    })
    if ("leaders" in answer) return answer
    const found = answer.topics.get(topic)
    return found === undefined
      ? undefined
      : {
          partitions: found.partitionsCount,
          // Each partition's leader, so one call's partitions on one broker can go in one send.
          leaders: Array.from({ length: found.partitionsCount }, (_, i) => found.partitions[i]?.leader ?? -1)
        }
  },
  createTopic: (request) =>
    admin.createTopics({
      topics: [request.topic],
      partitions: request.partitions,
      replicas: request.replicationFactor,
      configs: [...request.configs]
    }),
  createPartitions: (topic, count) => admin.createPartitions({ topics: [{ name: topic, count }] }),
  topicConfig: async (topic, name) => {
    const answer = await admin.describeConfigs({
      resources: [{ resourceType: ConfigResourceTypes.TOPIC, resourceName: topic, configurationKeys: [name] }]
    })
    return answer[0]?.configs.find((c) => c.name === name)?.value ?? undefined
  },
  groupOffsets: async (groupId, topics) => {
    const names = topics.map((t) => t.topic)
    const [committed, starts, ends] = await Promise.all([
      admin.listConsumerGroupOffsets({
        groups: [
          {
            groupId,
            topics: topics.map((t) => ({
              name: t.topic,
              partitionIndexes: Array.from({ length: t.partitions }, (_, i) => i)
            }))
          }
        ]
      }),
      offsets.listOffsets({ topics: names, timestamp: -2n }),
      offsets.listOffsets({ topics: names, timestamp: -1n })
    ])
    return topics.map(({ partitions, topic }) => {
      const positions = new Map(
        (committed[0]?.topics.find((t) => t.name === topic)?.partitions ?? []).map((p) => [
          p.partitionIndex,
          p.committedOffset
        ])
      )
      return Array.from({ length: partitions }, (_, partition) => {
        const offset = positions.get(partition)
        return {
          partition,
          // Kafka answers -1 for "no committed offset".
          committed: offset === undefined || offset < 0n ? null : offset.toString(),
          start: (starts.get(topic)?.[partition] ?? 0n).toString(),
          end: (ends.get(topic)?.[partition] ?? 0n).toString()
        }
      })
    })
  },
  commitGroupOffsets: (groupId, topic, partitions) =>
    admin.alterConsumerGroupOffsets({
      groupId,
      topics: [
        { name: topic, partitionOffsets: partitions.map((p) => ({ partition: p.partition, offset: BigInt(p.offset) })) }
      ]
    }),
  // Asked once (the client's own few retries only): the caller bounds the wait and retries.
  listTopics: Effect.tryPromise({
    try: () => admin.listTopics(),
    catch: (error) => {
      const classified = protocol.toAdminError("listTopics", "*", error)
      return new BrokerAdminError({ ...classified, reason: withSocketCauses(error) })
    }
  })
})
