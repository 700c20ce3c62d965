/**
 * The kafkajs client as the Kafka layer's `KafkaDriver`: metadata, topics, partitions, configs
 * and group offsets on the shared admin.
 */
import type { BrokerAdminError } from "@effect-outbox/core/Errors"
import type { KafkaDriver } from "@effect-outbox/kafka/KafkaDriver"
import * as Effect from "effect/Effect"
import Kafkajs from "kafkajs"
import type { KafkaClient } from "../KafkaClient.ts"
import { protocol } from "../KafkaErrors.ts"

/**
 * Every topic on the broker, asked once on a short-lived admin that does not retry (kafkajs's
 * default would try for about ten seconds, logging each failed connection): the caller bounds
 * the wait and retries. Also connects nothing the shared admin would keep.
 */
export const listTopics = (kafka: Kafkajs.Kafka): Effect.Effect<ReadonlyArray<string>, BrokerAdminError> =>
  Effect.tryPromise({
    try: async () => {
      const admin = kafka.admin({ retry: { retries: 0 } })
      try {
        await admin.connect()
        return await admin.listTopics()
      } finally {
        await admin.disconnect().catch(() => undefined)
      }
    },
    catch: (error) => protocol.toAdminError("listTopics", "*", error)
  })

export const make = ({ admin, askOnce, brokers, kafka, metadataAdmin }: KafkaClient["Service"]): KafkaDriver => ({
  brokers,
  protocol,
  // kafkajs fails the whole read when one partition has no leader (LEADER_NOT_AVAILABLE), after
  // retrying for seconds: asked once, the publisher falls back to its last good layout at once.
  metadata: async (topic) => {
    const metadata = await (metadataAdmin ?? admin).fetchTopicMetadata({ topics: [topic] })
    const found = metadata.topics.find((t) => t.name === topic)
    if (found === undefined) return undefined
    const partitions = [...found.partitions].sort((a, b) => a.partitionId - b.partitionId)
    return { partitions: partitions.length, leaders: partitions.map((p) => p.leader) }
  },
  createTopic: (request) =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic: request.topic,
          numPartitions: request.partitions,
          replicationFactor: request.replicationFactor,
          configEntries: [...request.configs]
        }
      ]
    }),
  createPartitions: (topic, count) => admin.createPartitions({ topicPartitions: [{ topic, count }] }),
  topicConfig: async (topic, name) => {
    const answer = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: Kafkajs.ConfigResourceTypes.TOPIC, name: topic, configNames: [name] }]
    })
    return answer.resources[0]?.configEntries.find((e) => e.configName === name)?.configValue
  },
  groupOffsets: async (groupId, topics) => {
    const names = topics.map((t) => t.topic)
    const [committed, bounds] = await Promise.all([
      admin.fetchOffsets({ groupId, topics: names }),
      Promise.all(names.map((topic) => admin.fetchTopicOffsets(topic)))
    ])
    return names.map((topic, i) => {
      const positions = new Map(
        (committed.find((c) => c.topic === topic)?.partitions ?? []).map((p) => [p.partition, p.offset])
      )
      return bounds[i]!.map((p) => {
        const offset = positions.get(p.partition)
        // Kafka answers -1 for "no committed offset".
        const none = offset === undefined || BigInt(offset) < 0n
        return { partition: p.partition, committed: none ? null : offset, start: p.low, end: p.high }
      })
    })
  },
  commitGroupOffsets: (groupId, topic, partitions) =>
    admin.setOffsets({
      groupId,
      topic,
      partitions: partitions.map((p) => ({ partition: p.partition, offset: p.offset }))
    }),
  listTopics: listTopics(askOnce ?? kafka)
})
