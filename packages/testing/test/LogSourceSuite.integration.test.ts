// PgLogSource passes the log engine's conformance suite on a wal_level=logical PostgreSQL
// (LOGICAL_DATABASE_URL, which scripts/test starts), on both transports (the replication stream,
// the default, and the SQL interface); each test on a slot of its own, dropped after.

import { PgClient } from "@effect/sql-pg"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as LogSourceSuite from "../src/LogSourceSuite.ts"
import * as Support from "./faults/support.ts"

const layer = (transport: PgLogSource.Options["transport"]) => () => {
  const slot = Support.uniqueName("log_suite").toLowerCase()
  const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 3 })
  const dropOnRelease = Layer.effectDiscard(Effect.addFinalizer(() => Effect.ignore(PgLogSource.dropSlot({ slot }))))
  return Layer.mergeAll(
    // Logical messages are database-wide: a prefix of its own keeps other tests' events out.
    // readAhead: the streaming transport offers readAfter only when asked; the suite checks it.
    PgLogSource.layer({ slot, prefix: slot, transport, readAhead: true }),
    PgLogSource.layerWriter({ slot, prefix: slot }),
    PgTransactor.layer,
    dropOnRelease
  ).pipe(Layer.provide(client))
}

LogSourceSuite.suite("PgLogSource (stream)", { layer: layer("stream") })
LogSourceSuite.suite("PgLogSource (sql)", { layer: layer("sql") })
