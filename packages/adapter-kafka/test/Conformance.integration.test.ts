// The conformance suites the in-memory broker passes, run against the real Kafka broker.
// Every topic a test creates is deleted after it through the suites' deleteTopics hook.
import * as BrokerSuite from "../../testing/src/BrokerSuite.ts"
import * as ConsumerSourceSuite from "../../testing/src/ConsumerSourceSuite.ts"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

const kafka = () => KafkaOutbox.layer({ brokers, clientId: "adapter-kafka-conformance" }, { consumer: consumerOptions })

const deleteTopics = (topics: ReadonlyArray<string>) =>
  KafkaClient.use((client) => KafkaBrokerAdmin.deleteTopics(client.admin, topics))

BrokerSuite.suite("KafkaOutbox", { layer: kafka, deleteTopics })
ConsumerSourceSuite.suite("KafkaOutbox", { layer: kafka, deleteTopics })
