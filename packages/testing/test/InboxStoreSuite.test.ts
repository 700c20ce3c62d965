import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as InboxStoreSuite from "../src/InboxStoreSuite.ts"

InboxStoreSuite.suite("InMemoryDatabase", { layer: () => InMemoryDatabase.layer })
