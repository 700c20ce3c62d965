/**
 * Everything the log engine needs on PostgreSQL, in one layer: `Outbox` (enqueue inserts into
 * the event table in the ambient transaction), `Transactor`, the slot's `LogSource` for the
 * relay (`LogRelay.run`), and the event table's retention (`PgLogRetention`).
 *
 * Building it runs the setup step first (unless `setup: false`): the migrations, then
 * `PgLogSource.ensureSlot`. That needs a role that owns the schema and has `REPLICATION`: the
 * simple deployment with one role. With separate roles (docs/log-relay.md, "Roles and grants"),
 * the operator runs the setup once and the services build this layer with `setup: false`.
 *
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import { PgLogOutbox } from "@effect-outbox/adapter-pg"
 * import * as Layer from "effect/Layer"
 * import * as Redacted from "effect/Redacted"
 *
 * const url = Redacted.make("postgres://postgres@127.0.0.1:5432/postgres")
 * export const layer = PgLogOutbox.layer({ slot: "orders_outbox" }).pipe(Layer.provideMerge(PgClient.layer({ url })))
 * ```
 *
 * @since 0.1.0
 */
import * as LogOutbox from "@effect-outbox/core/LogOutbox"
import { type LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import type { LogWriter } from "@effect-outbox/core/LogWriter"
import type { Outbox, Settings } from "@effect-outbox/core/Outbox"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as LogSetup from "./internal/logSetup.ts"
import * as PgLogFence from "./PgLogFence.ts"
import * as PgLogGauges from "./PgLogGauges.ts"
import * as PgLogProgress from "./PgLogProgress.ts"
import * as PgLogQuarantine from "./PgLogQuarantine.ts"
import * as PgLogRetention from "./PgLogRetention.ts"
import * as PgLogSource from "./PgLogSource.ts"
import * as PgMigrations from "./PgMigrations.ts"
import * as PgTables from "./PgTables.ts"
import * as PgTransactor from "./PgTransactor.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options
  extends PgLogSource.Options,
    PgLogProgress.Options,
    PgLogQuarantine.Options,
    PgLogFence.Options {
  readonly outbox?: Settings | undefined
  /** Run the migrations and `PgLogSource.ensureSlot` while the layer is built. Default `true`. */
  readonly setup?: boolean | undefined
  /**
   * The event table's partitions: made ahead and dropped past retention in the background
   * (`PgLogRetention.layer`). `false`: another process (or a scheduled job) runs
   * `PgLogRetention.maintain`. Default: on, with `PgLogRetention`'s defaults.
   */
  readonly retention?: PgLogRetention.Options | false | undefined
}

/**
 * The migrations, then the publication and the slot.
 *
 * @since 0.1.0
 * @category setup
 */
export const setup = (options: PgLogSource.Options = {}): Effect.Effect<void, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    // Refused before anything is created: a bad name, a server without logical decoding.
    yield* LogSetup.checkSlotName(options.slot ?? LogSetup.DEFAULT_SLOT)
    const tables = yield* PgTables.make({ schema: options.schema, tablePrefix: options.tablePrefix })
    const sql = yield* SqlClient.SqlClient
    yield* LogSetup.checkWalLevel((text, params) => sql.unsafe(text, params as Array<unknown>))
    yield* Effect.provideService(PgMigrations.run, PgTables.PgTables, tables)
    yield* PgLogSource.ensureSlot(options)
  }).pipe(
    Effect.catchTags({
      OutboxValidationError: (error) =>
        Effect.fail(new LogSourceError({ operation: "log.setup", reason: error.message, retriable: false })),
      StoreError: (error) =>
        Effect.fail(new LogSourceError({ operation: "log.setup", reason: error.reason, retriable: error.retriable }))
    })
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Outbox | LogSource | LogWriter | Transactor, LogSourceError, SqlClient.SqlClient> => {
  const services = LogOutbox.layerWith(options.outbox).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        PgLogSource.layerWriter(options),
        PgTransactor.layer,
        // Every lease gets the relay's durable progress (a restart's rewound slot is not
        // re-sent), its quarantine (an event refused for good does not stop the others) and a
        // fence (a holder cut off from the server stops publishing); every process samples the
        // slot's gauges, holder or not.
        PgLogQuarantine.layer(options).pipe(
          Layer.provide(PgLogGauges.layer(options)),
          Layer.provide(PgLogFence.layer(options)),
          Layer.provide(PgLogProgress.layer(options)),
          Layer.provide(PgLogSource.layer(options))
        )
      )
    )
  )
  const retention =
    options.retention === false
      ? Layer.empty
      : PgLogRetention.layer({
          ...options.retention,
          slot: options.slot,
          schema: options.schema,
          tablePrefix: options.tablePrefix
        })
  const withRetention = Layer.merge(services, retention)
  return options.setup === false
    ? withRetention
    : withRetention.pipe(Layer.provide(Layer.effectDiscard(setup(options))))
}
