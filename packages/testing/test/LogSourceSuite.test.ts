// The in-memory log passes the log engine's conformance suite (PgLogSource runs it in
// LogSourceSuite.integration.test.ts). The memory log has no rollback.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as InMemoryLog from "../src/InMemoryLog.ts"
import * as LogSourceSuite from "../src/LogSourceSuite.ts"

LogSourceSuite.suite("InMemoryLog", {
  layer: () => Layer.unwrap(Effect.map(InMemoryLog.make, InMemoryLog.layerWithWriter)),
  features: { transactional: false }
})
