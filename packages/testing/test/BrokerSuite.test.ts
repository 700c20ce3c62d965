import * as BrokerSuite from "../src/BrokerSuite.ts"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

BrokerSuite.suite("InMemoryBroker", { layer: () => InMemoryBroker.layer() })
