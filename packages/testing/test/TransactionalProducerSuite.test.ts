// The TransactionalProducer conformance suite on the in-memory broker; adapter-kafka runs it
// against the real broker.
import { randomUUID } from "node:crypto"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"
import * as InMemoryTopicReader from "../src/InMemoryTopicReader.ts"
import * as InMemoryTransactionalProducer from "../src/InMemoryTransactionalProducer.ts"
import * as TransactionalProducerSuite from "../src/TransactionalProducerSuite.ts"

TransactionalProducerSuite.suite("InMemoryTransactionalProducer", {
  layer: () =>
    Layer.mergeAll(InMemoryTransactionalProducer.layer(`memory-tx-${randomUUID()}`), InMemoryTopicReader.layer).pipe(
      Layer.provideMerge(InMemoryBroker.layer())
    ),
  producer: (transactionalId) =>
    Effect.map(Layer.build(InMemoryTransactionalProducer.layer(transactionalId)), Context.get(TransactionalProducer))
})
