// The conformance suites the in-memory broker passes, run against the real Kafka broker.
// Every topic a test creates is deleted after it through the suites' deleteTopics hook.
import * as BrokerSuite from "@effect-outbox/testing/BrokerSuite"
import * as ConsumerSourceSuite from "@effect-outbox/testing/ConsumerSourceSuite"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

// A group re-reads the topic metadata every 3 s (kafkajs default: 5 minutes), so the case of a
// grown topic does not wait for the default refresh.
const kafka = () =>
  KafkaOutbox.layer(
    { brokers, clientId: "adapter-kafka-conformance" },
    { consumer: { ...consumerOptions, consumerConfig: { metadataMaxAge: 3_000 } } }
  )

// Nothing listens on port 1: every connection is refused (no shared service is touched).
const unreachable = () =>
  KafkaOutbox.layer(
    {
      brokers: ["127.0.0.1:1"],
      clientId: "adapter-kafka-conformance-unreachable",
      connectionTimeout: 1_000,
      requestTimeout: 2_000,
      kafkaConfig: { retry: { retries: 1, initialRetryTime: 100 } }
    },
    { publisher: { publishTimeoutMillis: 5_000 } }
  )

const deleteTopics = (topics: ReadonlyArray<string>) =>
  KafkaClient.use((client) => KafkaBrokerAdmin.deleteTopics(client.admin, topics))

BrokerSuite.suite("KafkaOutbox", { layer: kafka, deleteTopics, unreachable })
ConsumerSourceSuite.suite("KafkaOutbox", { layer: kafka, deleteTopics })
