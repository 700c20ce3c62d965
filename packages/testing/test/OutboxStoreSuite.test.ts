import { Effect, Layer } from "effect"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as OutboxStoreSuite from "../src/OutboxStoreSuite.ts"

OutboxStoreSuite.suite("InMemoryDatabase", {
  layer: () => InMemoryDatabase.layer,
  // A stopped server: connections refused.
  unreachable: () =>
    Layer.unwrap(
      Effect.map(
        Effect.tap(InMemoryDatabase.make, (db) => db.control.outage({ mode: "down" })),
        InMemoryDatabase.layerFrom
      )
    )
})
