// The Broker conformance suite the kafkajs adapter and the in-memory broker pass, run against the
// real Kafka broker through @platformatic/kafka.
import * as Layer from "effect/Layer"
import * as BrokerSuite from "../../testing/src/BrokerSuite.ts"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import * as PlatformaticBrokerProbe from "../src/PlatformaticBrokerProbe.ts"
import * as PlatformaticClientModule from "../src/PlatformaticClient.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticPublisher from "../src/PlatformaticPublisher.ts"
import { brokers } from "./support.ts"

const kafka = () =>
  Layer.mergeAll(PlatformaticPublisher.layer(), PlatformaticBrokerProbe.layer(), PlatformaticBrokerAdmin.layer()).pipe(
    Layer.provideMerge(PlatformaticClientModule.layer({ brokers, clientId: "adapter-platformatic-conformance" }))
  )

const deleteTopics = (topics: ReadonlyArray<string>) =>
  PlatformaticClient.use((client) => PlatformaticBrokerAdmin.deleteTopics(client.admin, topics))

BrokerSuite.suite("PlatformaticKafkaOutbox", { layer: kafka, deleteTopics })
