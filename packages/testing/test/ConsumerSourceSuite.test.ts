import { Effect } from "effect"
import * as ConsumerSourceSuite from "../src/ConsumerSourceSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

ConsumerSourceSuite.suite("InMemoryBroker", {
  layer: () => InMemoryBroker.layer({ maxBatchSize: 50 }),
  deleteTopics: (topics) =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* Effect.forEach(topics, broker.deleteTopic)
    })
})
