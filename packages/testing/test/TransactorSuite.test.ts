import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as TransactorSuite from "../src/TransactorSuite.ts"

TransactorSuite.suite("InMemoryDatabase", { layer: () => InMemoryDatabase.layer })
