import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as PartitionAssignmentStoreSuite from "../src/PartitionAssignmentStoreSuite.ts"

PartitionAssignmentStoreSuite.suite("InMemoryDatabase", { layer: () => InMemoryDatabase.layer })
