// The TransactionalProducer conformance suite on KafkaTransactionalProducer against the real
// Kafka broker (reads through KafkaTopicReader, read_committed). Every topic a test creates is
// deleted after it.
import { randomUUID } from "node:crypto"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as TransactionalProducerSuite from "@effect-outbox/testing/TransactionalProducerSuite"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as KafkaBrokerAdmin from "../src/KafkaBrokerAdmin.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import * as KafkaTransactionalProducer from "../src/KafkaTransactionalProducer.ts"
import { brokers, consumerOptions } from "./support.ts"

TransactionalProducerSuite.suite("KafkaTransactionalProducer", {
  layer: () =>
    KafkaTransactionalProducer.layer({ transactionalId: `adapter-kafka-tx-conformance-${randomUUID()}` }).pipe(
      Layer.provideMerge(
        KafkaOutbox.layer({ brokers, clientId: "adapter-kafka-tx-conformance" }, { consumer: consumerOptions })
      )
    ),
  producer: (transactionalId) =>
    Effect.map(Layer.build(KafkaTransactionalProducer.layer({ transactionalId })), Context.get(TransactionalProducer)),
  deleteTopics: (topics) => KafkaClient.use((client) => KafkaBrokerAdmin.deleteTopics(client.admin, topics))
})
