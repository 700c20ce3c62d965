import { Effect, Layer } from "effect"
import * as BrokerSuite from "../src/BrokerSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

BrokerSuite.suite("InMemoryBroker", {
  layer: () => InMemoryBroker.layer(),
  // The in-memory broker keeps every record: it has no retention to read.
  features: { retention: false },
  deleteTopics: (topics) =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* Effect.forEach(topics, broker.deleteTopic)
    }),
  // A broker that refuses connections.
  unreachable: () =>
    Layer.unwrap(
      Effect.map(
        Effect.tap(InMemoryBroker.make(), (broker) => broker.control.outage({ mode: "refuse" })),
        InMemoryBroker.layerFrom
      )
    )
})
