// The TransactionalProducer conformance suite on PlatformaticTransactionalProducer against the
// real Kafka broker (reads through PlatformaticTopicReader, read_committed). Every topic a test
// creates is deleted after it.
import { randomUUID } from "node:crypto"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as TransactionalProducerSuite from "@effect-outbox/testing/TransactionalProducerSuite"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PlatformaticBrokerAdmin from "../src/PlatformaticBrokerAdmin.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import * as PlatformaticTransactionalProducer from "../src/PlatformaticTransactionalProducer.ts"
import { brokers, consumerOptions } from "./support.ts"

TransactionalProducerSuite.suite("PlatformaticTransactionalProducer", {
  layer: () =>
    PlatformaticTransactionalProducer.layer({
      transactionalId: `adapter-platformatic-tx-conformance-${randomUUID()}`
    }).pipe(
      Layer.provideMerge(
        PlatformaticKafkaOutbox.layer(
          { brokers, clientId: "adapter-platformatic-tx-conformance" },
          { consumer: consumerOptions }
        )
      )
    ),
  producer: (transactionalId) =>
    Effect.map(
      Layer.build(PlatformaticTransactionalProducer.layer({ transactionalId })),
      Context.get(TransactionalProducer)
    ),
  deleteTopics: (topics) =>
    PlatformaticClient.use((client) => PlatformaticBrokerAdmin.deleteTopics(client.admin, topics))
})
