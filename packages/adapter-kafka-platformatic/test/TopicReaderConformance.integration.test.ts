// The TopicReader conformance suite on PlatformaticTopicReader (group-less fetches) against the
// real Kafka broker. Every topic a test creates is deleted after it.
import * as TopicReaderSuite from "@effect-outbox/testing/TopicReaderSuite"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

TopicReaderSuite.suite("PlatformaticTopicReader", {
  layer: () =>
    PlatformaticKafkaOutbox.layer(
      { brokers, clientId: "adapter-platformatic-reader-conformance" },
      { consumer: consumerOptions }
    ),
  deleteTopics: (topics) =>
    PlatformaticClient.use((client) => PlatformaticBrokerAdmin.deleteTopics(client.admin, topics))
})
