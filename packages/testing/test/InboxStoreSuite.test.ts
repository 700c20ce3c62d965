import * as InboxStoreSuite from "../src/InboxStoreSuite.ts"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"

InboxStoreSuite.suite("InMemoryDatabase", { layer: () => InMemoryDatabase.layer })
