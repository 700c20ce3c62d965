import * as ConsumerSourceSuite from "../src/ConsumerSourceSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

ConsumerSourceSuite.suite("InMemoryBroker", { layer: () => InMemoryBroker.layer({ maxBatchSize: 50 }) })
