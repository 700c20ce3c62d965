import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as OutboxStoreSuite from "../src/OutboxStoreSuite.ts"

OutboxStoreSuite.suite("InMemoryDatabase", { layer: () => InMemoryDatabase.layer })
