// The conformance suites the in-memory layers pass, run against the real PostgreSQL. Every test
// gets a fresh schema (migrated, then dropped) and its own small pool.
import * as Layer from "effect/Layer"
import * as InboxStoreSuite from "../../testing/src/InboxStoreSuite.ts"
import * as OutboxStoreSuite from "../../testing/src/OutboxStoreSuite.ts"
import * as PartitionAssignmentStoreSuite from "../../testing/src/PartitionAssignmentStoreSuite.ts"
import * as TransactorSuite from "../../testing/src/TransactorSuite.ts"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgPartitionAssignmentStore from "../src/PgPartitionAssignmentStore.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import { freshTables, pgClient } from "./support.ts"

const stores = () =>
  Layer.mergeAll(
    PgOutboxStore.layer(),
    PgInboxStore.layer,
    PgTransactor.layer,
    PgPartitionAssignmentStore.layer
  ).pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(10)))

OutboxStoreSuite.suite("PostgreSQL", { layer: stores })
InboxStoreSuite.suite("PostgreSQL", { layer: stores })
TransactorSuite.suite("PostgreSQL", { layer: stores })
PartitionAssignmentStoreSuite.suite("PostgreSQL", { layer: stores })
