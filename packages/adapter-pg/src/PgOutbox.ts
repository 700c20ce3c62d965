/**
 * Every PostgreSQL service of effect-outbox in one layer: tables (migrated at start-up unless
 * switched off), `OutboxStore`, `InboxStore`, `Transactor`, `PartitionAssignmentStore`,
 * `ParkedStore`, `LifecycleRegistry`, `WakeUp` and the operators' `ReadModel`, all on one `PgClient`.
 *
 * ```ts
 * const Database = PgClient.layerConfig({ url: Config.Redacted("DATABASE_URL") })
 * const Storage = PgOutbox.layer({ schema: "outbox" }).pipe(Layer.provide(Database))
 * ```
 *
 * @since 0.1.0
 */

import * as PgClient from "@effect/sql-pg/PgClient"
import * as Consumer from "@effect-outbox/core/Consumer"
import type { OutboxValidationError, StoreError } from "@effect-outbox/core/Errors"
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { ParkedStore } from "@effect-outbox/core/ParkedStore"
import type { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import type { ReadModel } from "@effect-outbox/core/ReadModel"
import { StorageLocation } from "@effect-outbox/core/StorageLocation"
import type { Transactor } from "@effect-outbox/core/Transactor"
import type { WakeUp } from "@effect-outbox/core/WakeUp"
import type * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { describe } from "./internal/location.ts"
import { variables } from "./internal/variables.ts"
import * as PgEngine from "./PgEngine.ts"
import * as PgErrors from "./PgErrors.ts"
import * as PgInboxStore from "./PgInboxStore.ts"
import * as PgLifecycleRegistry from "./PgLifecycleRegistry.ts"
import * as PgMigrations from "./PgMigrations.ts"
import * as PgOutboxStore from "./PgOutboxStore.ts"
import * as PgParkedStore from "./PgParkedStore.ts"
import * as PgPartitionAssignmentStore from "./PgPartitionAssignmentStore.ts"
import * as PgReadModel from "./PgReadModel.ts"
import * as PgTables from "./PgTables.ts"
import * as PgTransactor from "./PgTransactor.ts"
import * as PgWakeUp from "./PgWakeUp.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends PgTables.Options {
  /** Run the migrations while the layer is built. Default `true`. */
  readonly migrate?: boolean | undefined
  readonly store?: PgOutboxStore.Options | undefined
  readonly wakeUp?: PgWakeUp.Options | undefined
  readonly parked?: PgParkedStore.Options | undefined
}

/**
 * The services this package provides.
 *
 * @since 0.1.0
 * @category models
 */
export type Services =
  | OutboxStore
  | InboxStore
  | Transactor
  | PartitionAssignmentStore
  | ParkedStore
  | LifecycleRegistry
  | WakeUp
  | ReadModel
  | PgTables.PgTables

/**
 * All services from an existing `PgClient` (which also provides the `SqlClient` they join).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Services, StoreError | OutboxValidationError, PgClient.PgClient | SqlClient.SqlClient> => {
  const tables = PgTables.layer(options)
  const migrated =
    options.migrate === false ? tables : Layer.merge(tables, PgMigrations.layer.pipe(Layer.provide(tables)))
  return Layer.mergeAll(
    // in the in-transaction mode the insert queues the NOTIFY in its own statement and says so;
    // the enqueue then skips the wake-up's round trip
    PgOutboxStore.layer({
      notify: options.wakeUp?.notifyInTransaction === true && options.wakeUp.notify !== false,
      ...options.store
    }),
    PgInboxStore.layer,
    PgTransactor.layer,
    PgPartitionAssignmentStore.layer,
    PgParkedStore.layer(options.parked),
    PgLifecycleRegistry.layer,
    PgWakeUp.layer(options.wakeUp),
    PgReadModel.layer,
    // a consumer's handler running its own SQL: this database's failures wait with the partition
    Layer.succeed(Consumer.DefaultInfrastructureTest)(PgErrors.isInfrastructure),
    // for the runtime's start line
    Layer.effect(StorageLocation)(
      Effect.gen(function* () {
        const client = yield* PgClient.PgClient
        return describe((yield* PgTables.PgTables).schema, client.config)
      })
    )
  ).pipe(Layer.provideMerge(migrated))
}

/**
 * Reads the configuration: `DATABASE_URL` (required), `DATABASE_*` for the pool and `OUTBOX_*`
 * for the tables and wake-ups; each variable's type, default and meaning is in
 * docs/configuration.md (generated from the table this reads through).
 *
 * @since 0.1.0
 * @category layers
 */
const claimConfig: Layer.Layer<
  Services | PgClient.PgClient | SqlClient.SqlClient,
  StoreError | OutboxValidationError | Config.ConfigError | SqlError
> = Layer.unwrap(
  Effect.gen(function* () {
    const url = yield* variables.url.config
    const maxConnections = yield* variables.maxConnections.config
    const schema = yield* variables.schema.config
    const tablePrefix = yield* variables.tablePrefix.config
    const migrate = yield* variables.migrate.config
    const notify = yield* variables.notify.config
    const notifyInTransaction = yield* variables.notifyInTransaction.config
    const notifyInterval = yield* variables.notifyInterval.config
    const listen = yield* variables.listen.config
    const recordTransitions = yield* variables.recordTransitions.config
    const keepAlive = yield* variables.keepAlive.config
    const callTimeout = yield* variables.callTimeout.config
    // TCP keep-alive: without it a half-open connection (a peer that vanished) is noticed only
    // when the OS gives up retransmitting, about 15 minutes.
    const client = PgClient.layer({ url, maxConnections, keepAlive })
    return layer({
      schema,
      tablePrefix,
      migrate,
      store: { recordTransitions, callTimeout },
      wakeUp: { notify, notifyInTransaction, notifyInterval, listen, fallbackPollInterval: Duration.seconds(1) }
    }).pipe(Layer.provideMerge(client))
  })
)

/**
 * Every service from the environment: the stores as {@link claimConfig} reads them, and with
 * `OUTBOX_ENGINE=log` the log engine's `LogWriter` and `LogSource` on top (`PgEngine`:
 * `OUTBOX_LOG_SLOT`), which `OutboxRuntime.layer` picks up on that engine.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<
  Services | PgClient.PgClient | SqlClient.SqlClient,
  StoreError | OutboxValidationError | Config.ConfigError | SqlError | PgEngine.EngineError
> = PgEngine.withEngine(claimConfig)
