/**
 * The engine's storage on PostgreSQL, chosen by configuration (`OUTBOX_ENGINE`, see core
 * `OutboxEngine`). `PgOutbox.layerConfig` uses it: on `log` it adds the log engine's services
 * (`PgLogOutbox.layer`: the `LogWriter` enqueue writes through and the slot's `LogSource` the
 * relay reads) beside the claim engine's stores, which both engines keep using for the inbox,
 * the parked keys and the dead-letter bookkeeping. `OutboxRuntime.layer` finds them when it
 * starts on the log engine.
 *
 * | variable | default | |
 * |---|---|---|
 * | `OUTBOX_ENGINE` | `claim` | `claim` or `log` |
 * | `OUTBOX_LOG_SLOT` | `<schema>_<prefix>log` | the log engine's replication slot (and publication) |
 *
 * The log engine needs `wal_level = logical` and a role with `REPLICATION` (docs/log-relay.md).
 *
 * @since 0.1.0
 */
import type { LogSourceError } from "@effect-outbox/core/LogSource"
import * as OutboxEngine from "@effect-outbox/core/OutboxEngine"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as SqlClient from "effect/sql/SqlClient"
import { variables } from "./internal/variables.ts"
import * as PgLogOutbox from "./PgLogOutbox.ts"
import * as PgTables from "./PgTables.ts"

const SLOT = /^[a-z0-9_]{1,63}$/

/**
 * The slot a schema's log engine uses unless `OUTBOX_LOG_SLOT` says otherwise:
 * `<schema>_<prefix>log` in a replication slot's alphabet (lower case, other characters as `_`,
 * at most 63), so two services with their own schema in one database never share a slot.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultSlot = (schema = "outbox", tablePrefix = "outbox_"): string =>
  `${schema}_${tablePrefix}log`
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, "_")
    .slice(0, 63)

/**
 * `OUTBOX_LOG_SLOT`, checked against a replication slot's alphabet; default {@link defaultSlot}.
 *
 * @since 0.1.0
 * @category config
 */
export const slotConfig = (schema?: string, tablePrefix?: string): Config.Config<string> =>
  variables.logSlot.config.pipe(
    Config.map(Option.getOrElse(() => defaultSlot(schema, tablePrefix))),
    Config.flatMap((slot) =>
      SLOT.test(slot)
        ? Config.succeed(slot)
        : Config.fail(
            new ConfigProvider.SourceError({
              message: `OUTBOX_LOG_SLOT: "${slot}" is not a replication slot name (1-63 of a-z, 0-9, _)`
            })
          )
    )
  )

/**
 * What building the log engine's services can fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type EngineError = LogSourceError | Config.ConfigError

/**
 * Nothing on the claim engine; on the log engine `PgLogOutbox.layer` for the configured slot, in
 * the schema and with the prefix of the `PgTables` in context. Its services are not in the type:
 * which engine runs is configuration, and the claim engine's compositions must type-check
 * without them. `OutboxRuntime.layer` looks them up when it starts (and says what is missing
 * when they are not there).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<never, EngineError, SqlClient.SqlClient | PgTables.PgTables> = Layer.unwrap(
  Effect.gen(function* () {
    const engine = yield* OutboxEngine.config
    if (engine === "claim") return Layer.empty
    const { schema, tablePrefix } = yield* PgTables.PgTables
    const slot = yield* slotConfig(schema, tablePrefix)
    // Not a literal: the log layer takes more options as it grows (its table's schema and prefix).
    const log = { slot, schema, tablePrefix }
    return PgLogOutbox.layer(log)
  })
)

/**
 * `stores` (the claim engine's, `PgOutbox.layer`), then {@link layerConfig} on them: the log
 * engine's services after the stores' migrations, one migration run at a time.
 *
 * @since 0.1.0
 * @category layers
 */
export const withEngine = <A, E, R>(
  stores: Layer.Layer<A | PgTables.PgTables | SqlClient.SqlClient, E, R>
): Layer.Layer<A | PgTables.PgTables | SqlClient.SqlClient, E | EngineError, R> =>
  layerConfig.pipe(Layer.provideMerge(stores))
