// The conformance suites the kafkajs adapter and the in-memory broker pass, run against the real
// Kafka broker through @platformatic/kafka. Every topic a test creates is deleted after it.
import * as BrokerSuite from "../../testing/src/BrokerSuite.ts"
import * as ConsumerSourceSuite from "../../testing/src/ConsumerSourceSuite.ts"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

const kafka = () =>
  PlatformaticKafkaOutbox.layer(
    { brokers, clientId: "adapter-platformatic-conformance" },
    { consumer: consumerOptions }
  )

const deleteTopics = (topics: ReadonlyArray<string>) =>
  PlatformaticClient.use((client) => PlatformaticBrokerAdmin.deleteTopics(client.admin, topics))

BrokerSuite.suite("PlatformaticKafkaOutbox", { layer: kafka, deleteTopics })
ConsumerSourceSuite.suite("PlatformaticKafkaOutbox", { layer: kafka, deleteTopics })
