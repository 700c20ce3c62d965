// The conformance suites the in-memory broker passes, run against the real Kafka broker.
// Every topic a test creates through BrokerAdmin is deleted when that test's layer closes.
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as BrokerSuite from "../../testing/src/BrokerSuite.ts"
import * as ConsumerSourceSuite from "../../testing/src/ConsumerSourceSuite.ts"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import { brokers, consumerOptions } from "./support.ts"

/** BrokerAdmin that remembers the topics it created and deletes them on release. */
const deletingCreatedTopics = Layer.effect(BrokerAdmin)(
  Effect.gen(function*() {
    const admin = yield* BrokerAdmin
    const client = yield* KafkaClient
    const created = new Set<string>()
    yield* Effect.addFinalizer(() => KafkaBrokerAdmin.deleteTopics(client.admin, [...created]))
    return BrokerAdmin.of({
      ...admin,
      ensureTopic: (request) => Effect.tap(admin.ensureTopic(request), () => Effect.sync(() => created.add(request.topic)))
    })
  })
)

const kafka = () =>
  deletingCreatedTopics.pipe(
    Layer.provideMerge(KafkaOutbox.layer({ brokers, clientId: "adapter-kafka-conformance" }, { consumer: consumerOptions }))
  )

BrokerSuite.suite("KafkaOutbox", { layer: kafka })
ConsumerSourceSuite.suite("KafkaOutbox", { layer: kafka })
