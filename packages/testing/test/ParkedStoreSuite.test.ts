import * as InMemoryParkedStore from "../src/InMemoryParkedStore.ts"
import * as ParkedStoreSuite from "../src/ParkedStoreSuite.ts"

ParkedStoreSuite.suite("InMemoryParkedStore", { layer: (maxRecords) => InMemoryParkedStore.layer({ maxRecords }) })
