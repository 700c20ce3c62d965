import { Effect } from "effect"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as TransactorSuite from "../src/TransactorSuite.ts"

TransactorSuite.suite("InMemoryDatabase", {
  layer: () => InMemoryDatabase.layer,
  // The server drops the connection (a crash or a failover); it is back at once, the
  // transaction's connection is not.
  terminateConnection: Effect.gen(function* () {
    const db = yield* InMemoryDatabase.InMemoryDatabase
    yield* db.outage({ mode: "crash" })
    yield* db.recover
  })
})
