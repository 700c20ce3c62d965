import { Effect } from "effect"
import * as BrokerSuite from "../src/BrokerSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

BrokerSuite.suite("InMemoryBroker", {
  layer: () => InMemoryBroker.layer(),
  deleteTopics: (topics) =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* Effect.forEach(topics, broker.deleteTopic)
    })
})
