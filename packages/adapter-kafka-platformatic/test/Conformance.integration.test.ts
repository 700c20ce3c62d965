// The conformance suites the kafkajs adapter and the in-memory broker pass, run against the real
// Kafka broker through @platformatic/kafka. Every topic a test creates is deleted after it.
import * as BrokerSuite from "@effect-outbox/testing/BrokerSuite"
import * as ConsumerSourceSuite from "@effect-outbox/testing/ConsumerSourceSuite"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

const kafka = () =>
  PlatformaticKafkaOutbox.layer(
    // Groups see a grown topic after a metadata refresh: 3 s here, as the kafkajs suite runs.
    { brokers, clientId: "adapter-platformatic-conformance", clientOptions: { metadataMaxAge: 3_000 } },
    { consumer: consumerOptions }
  )

const deleteTopics = (topics: ReadonlyArray<string>) =>
  PlatformaticClient.use((client) => PlatformaticBrokerAdmin.deleteTopics(client.admin, topics))

BrokerSuite.suite("PlatformaticKafkaOutbox", { layer: kafka, deleteTopics })
// @platformatic/kafka 2.12 reassigns partitions only when the group rebalances: a running group
// does not pick up partitions added to its topic (docs/kafka.md, "Differences").
ConsumerSourceSuite.suite("PlatformaticKafkaOutbox", {
  layer: kafka,
  deleteTopics,
  features: { partitionGrowth: false }
})
