import { Effect } from "effect"
import * as ConsumerSourceSuite from "../src/ConsumerSourceSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

// A group notices a grown topic one second late, like a real consumer at its metadata refresh.
ConsumerSourceSuite.suite("InMemoryBroker", {
  layer: () => InMemoryBroker.layer({ maxBatchSize: 50, metadataMaxAge: "1 second" }),
  deleteTopics: (topics) =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* Effect.forEach(topics, broker.deleteTopic)
    })
})
