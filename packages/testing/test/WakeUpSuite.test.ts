// The WakeUp conformance suite on the in-memory wake-up (core's `layerMemory`) beside the
// in-memory database's Transactor. It signals at once and knows no transaction (feature
// `afterCommit` off, reason in the suite); PostgreSQL's runs in adapter-pg.
import * as WakeUp from "@effect-outbox/core/WakeUp"
import * as Layer from "effect/Layer"
import * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as WakeUpSuite from "../src/WakeUpSuite.ts"

WakeUpSuite.suite("WakeUp.layerMemory", {
  layer: () => Layer.merge(WakeUp.layerMemory, InMemoryDatabase.layer),
  features: { afterCommit: false }
})
