// The TopicReader conformance suite on KafkaTopicReader against the real Kafka broker. Every
// topic a test creates is deleted after it.
import * as TopicReaderSuite from "@effect-outbox/testing/TopicReaderSuite"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

TopicReaderSuite.suite("KafkaTopicReader", {
  layer: () =>
    KafkaOutbox.layer({ brokers, clientId: "adapter-kafka-reader-conformance" }, { consumer: consumerOptions }),
  deleteTopics: (topics) => KafkaClient.use((client) => KafkaBrokerAdmin.deleteTopics(client.admin, topics))
})
