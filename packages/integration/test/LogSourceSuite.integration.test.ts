// PgLogSource passes the log engine's conformance suite on a wal_level=logical PostgreSQL
// (LOGICAL_DATABASE_URL, which scripts/test starts), on both transports (the replication stream,
// the default, and the SQL interface); each test on a schema and a slot of its own, dropped after.

import { PgClient } from "@effect/sql-pg"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import * as LogSourceSuite from "@effect-outbox/testing/LogSourceSuite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const layer = (transport: PgLogSource.Options["transport"]) => () => {
  const slot = Support.uniqueName("log_suite").toLowerCase()
  const options = { slot, schema: slot }
  const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 3 })
  const setup = Layer.effectDiscard(
    Effect.andThen(
      PgLogOutbox.setup(options),
      Effect.addFinalizer(() =>
        Effect.ignore(
          Effect.andThen(
            PgLogSource.dropSlot(options),
            Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS ${slot} CASCADE`))
          )
        )
      )
    )
  )
  return Layer.mergeAll(
    // readAhead: the streaming transport offers readAfter only when asked; the suite checks it.
    PgLogSource.layer({ ...options, transport, readAhead: true }),
    PgLogSource.layerWriter(options),
    PgTransactor.layer
  ).pipe(Layer.provide(setup), Layer.provide(client))
}

LogSourceSuite.suite("PgLogSource (stream)", { layer: layer("stream") })
LogSourceSuite.suite("PgLogSource (sql)", { layer: layer("sql") })
