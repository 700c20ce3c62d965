// The conformance suites the in-memory layers pass, run against the real PostgreSQL. Every test
// gets a fresh schema (migrated, then dropped) and its own small pool.

import { PgClient } from "@effect/sql-pg"
import * as InboxStoreSuite from "@effect-outbox/testing/InboxStoreSuite"
import * as LifecycleRegistrySuite from "@effect-outbox/testing/LifecycleRegistrySuite"
import * as OutboxStoreSuite from "@effect-outbox/testing/OutboxStoreSuite"
import * as ParkedStoreSuite from "@effect-outbox/testing/ParkedStoreSuite"
import * as PartitionAssignmentStoreSuite from "@effect-outbox/testing/PartitionAssignmentStoreSuite"
import * as TransactorSuite from "@effect-outbox/testing/TransactorSuite"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import * as PgLifecycleRegistry from "../src/PgLifecycleRegistry.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgParkedStore from "../src/PgParkedStore.ts"
import * as PgPartitionAssignmentStore from "../src/PgPartitionAssignmentStore.ts"
import * as PgTables from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import { freshTables, pgClient } from "./support.ts"

const stores = () =>
  Layer.mergeAll(PgOutboxStore.layer(), PgInboxStore.layer, PgTransactor.layer, PgPartitionAssignmentStore.layer).pipe(
    Layer.provideMerge(freshTables()),
    Layer.provideMerge(pgClient(10))
  )

// Nothing listens on port 1: every connection is refused (the shared server is not touched).
const unreachable = () =>
  Layer.mergeAll(PgOutboxStore.layer(), PgInboxStore.layer, PgTransactor.layer, PgPartitionAssignmentStore.layer).pipe(
    Layer.provideMerge(Layer.effect(PgTables.PgTables)(PgTables.make({ schema: "unreachable" }))),
    Layer.provideMerge(
      PgClient.layer({ url: Redacted.make("postgres://postgres@127.0.0.1:1/postgres"), maxConnections: 1 })
    )
  )

// The transaction's own backend is terminated, as a fast shutdown or a failover does to every
// session: the terminating statement gets 57P01, the transaction's next one finds the connection
// closed (ConnectionError). No other session is touched.
const terminateConnection = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`SELECT pg_terminate_backend(pg_backend_pid())`
})

OutboxStoreSuite.suite("PostgreSQL", { layer: stores, unreachable })
InboxStoreSuite.suite("PostgreSQL", { layer: stores })
TransactorSuite.suite("PostgreSQL", { layer: stores, terminateConnection })
PartitionAssignmentStoreSuite.suite("PostgreSQL", { layer: stores })
ParkedStoreSuite.suite("PostgreSQL", {
  layer: (maxRecords) =>
    PgParkedStore.layer({ maxRecords }).pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(4)))
})
LifecycleRegistrySuite.suite("PostgreSQL", {
  layer: () => PgLifecycleRegistry.layer.pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(2)))
})
