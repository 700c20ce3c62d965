/**
 * Every PostgreSQL service of effect-outbox in one layer: tables (migrated at start-up unless
 * switched off), `OutboxStore`, `InboxStore`, `Transactor`, `PartitionAssignmentStore`,
 * `ParkedStore`, `WakeUp` and the operators' `ReadModel`, all on one `PgClient`.
 *
 * ```ts
 * const Database = PgClient.layerConfig({ url: Config.Redacted("DATABASE_URL") })
 * const Storage = PgOutbox.layer({ schema: "outbox" }).pipe(Layer.provide(Database))
 * ```
 *
 * @since 0.1.0
 */

import * as PgClient from "@effect/sql-pg/PgClient"
import type { OutboxStoreError, OutboxValidationError } from "@effect-outbox/core/Errors"
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { ParkedStore } from "@effect-outbox/core/ParkedStore"
import type { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import type { ReadModel } from "@effect-outbox/core/ReadModel"
import type { Transactor } from "@effect-outbox/core/Transactor"
import type { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as PgEngine from "./PgEngine.ts"
import * as PgInboxStore from "./PgInboxStore.ts"
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
): Layer.Layer<Services, OutboxStoreError | OutboxValidationError, PgClient.PgClient | SqlClient.SqlClient> => {
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
    PgWakeUp.layer(options.wakeUp),
    PgReadModel.layer
  ).pipe(Layer.provideMerge(migrated))
}

/**
 * Reads the configuration:
 *
 * | variable | default | |
 * |---|---|---|
 * | `DATABASE_URL` | required | the connection string |
 * | `DATABASE_MAX_CONNECTIONS` | 10 | pool size |
 * | `OUTBOX_SCHEMA` | `outbox` | schema of the tables |
 * | `OUTBOX_TABLE_PREFIX` | `outbox_` | table name prefix |
 * | `OUTBOX_MIGRATE` | `true` | run migrations at start-up |
 * | `OUTBOX_NOTIFY` | `true` | after each enqueueing commit, a coalesced `NOTIFY` for relays in other processes |
 * | `OUTBOX_NOTIFY_IN_TRANSACTION` | `false` | the old mode: `NOTIFY` inside the enqueueing transaction (serialises commits) |
 * | `OUTBOX_NOTIFY_INTERVAL` | `50 millis` | at most one after-commit `NOTIFY` per this interval per process |
 * | `OUTBOX_LISTEN` | `true` | relays `LISTEN` (else poll only) |
 * | `OUTBOX_RECORD_TRANSITIONS` | `false` | append transitions to `<prefix>transition` |
 * | `DATABASE_KEEPALIVE` | `30 seconds` | idle time before TCP keep-alive probes (a dead peer is noticed in about a minute, not 15) |
 * | `OUTBOX_DB_CALL_TIMEOUT` | `30 seconds` | claim / transition / findStale give up after this (see `PgOutboxStore.Options.callTimeout`) |
 *
 * @since 0.1.0
 * @category layers
 */
const claimConfig: Layer.Layer<
  Services | PgClient.PgClient | SqlClient.SqlClient,
  OutboxStoreError | OutboxValidationError | Config.ConfigError | SqlError
> = Layer.unwrap(
  Effect.gen(function* () {
    const url = yield* Config.Redacted("DATABASE_URL")
    const maxConnections = yield* Config.Int("DATABASE_MAX_CONNECTIONS").pipe(Config.withDefault(10))
    const schema = yield* Config.String("OUTBOX_SCHEMA").pipe(Config.withDefault("outbox"))
    const tablePrefix = yield* Config.String("OUTBOX_TABLE_PREFIX").pipe(Config.withDefault("outbox_"))
    const migrate = yield* Config.Boolean("OUTBOX_MIGRATE").pipe(Config.withDefault(true))
    const notify = yield* Config.Boolean("OUTBOX_NOTIFY").pipe(Config.withDefault(true))
    const notifyInTransaction = yield* Config.Boolean("OUTBOX_NOTIFY_IN_TRANSACTION").pipe(Config.withDefault(false))
    const notifyInterval = yield* Config.Duration("OUTBOX_NOTIFY_INTERVAL").pipe(
      Config.withDefault(Duration.millis(50))
    )
    const listen = yield* Config.Boolean("OUTBOX_LISTEN").pipe(Config.withDefault(true))
    const recordTransitions = yield* Config.Boolean("OUTBOX_RECORD_TRANSITIONS").pipe(Config.withDefault(false))
    const keepAlive = yield* Config.Duration("DATABASE_KEEPALIVE").pipe(Config.withDefault(Duration.seconds(30)))
    const callTimeout = yield* Config.Duration("OUTBOX_DB_CALL_TIMEOUT").pipe(Config.withDefault(Duration.seconds(30)))
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
  OutboxStoreError | OutboxValidationError | Config.ConfigError | SqlError | PgEngine.EngineError
> = PgEngine.withEngine(claimConfig)
