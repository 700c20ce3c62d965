/**
 * Which relay engine a service runs, chosen by configuration (`OUTBOX_ENGINE`):
 *
 * - `claim` (the default): events are rows of the outbox table; relays claim them with leases,
 *   stale recovery and the reconciler look after them, and consumers drive each row's lifecycle.
 * - `log`: events are read from PostgreSQL's WAL through a logical replication slot; one relay
 *   holds the slot's lease and publishes in commit order (`LogRelay`). There are no outbox rows,
 *   so no claim relays, stale recovery or reconciler, and a consumer's lifecycle step does
 *   nothing (see docs/log-relay.md).
 *
 * `OutboxRuntime.layer` runs the engine this names; `PgOutbox.layerConfig` provides the storage
 * for it from the same variable.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Schema from "effect/Schema"
import * as EnvVariable from "./EnvVariable.ts"

/**
 * The engines, in the order the configuration error lists them.
 *
 * @since 0.1.0
 * @category constants
 */
export const engines = ["claim", "log"] as const

/**
 * @since 0.1.0
 * @category models
 */
export type Engine = (typeof engines)[number]

const isEngine = (value: string): value is Engine => (engines as ReadonlyArray<string>).includes(value)

/**
 * `OUTBOX_ENGINE`: `claim` (default) or `log`, case and surrounding spaces ignored; any other
 * value fails with a configuration error that names the allowed ones.
 *
 * @since 0.1.0
 * @category config
 */
const engineConfig: Config.Config<Engine> = Config.String("OUTBOX_ENGINE").pipe(
  Config.withDefault("claim"),
  Config.flatMap((raw): Config.Config<Engine> => {
    const value = raw.trim().toLowerCase()
    return isEngine(value)
      ? Config.succeed(value)
      : Config.fail(
          new ConfigProvider.SourceError({
            message: `OUTBOX_ENGINE: "${raw}" is not an engine; use one of ${engines.join(", ")}`
          })
        )
  })
)

const variables = EnvVariable.table(
  { package: "core", title: "Engine" },
  {
    engine: EnvVariable.make({
      name: "OUTBOX_ENGINE",
      type: engines.map((engine) => `\`${engine}\``).join(" \\| "),
      default: "`claim`",
      description:
        "which relay engine `OutboxRuntime.layer` runs and what `PgOutbox.layerConfig` provides: the outbox table (`claim`) or the WAL (`log`)",
      config: engineConfig
    })
  }
)

export const config: Config.Config<Engine> = variables.engine.config

/**
 * The log engine was selected but its services are missing: `LogWriter` (enqueue) and
 * `LogSource` (the relay's slot). `PgOutbox.layerConfig` provides them when `OUTBOX_ENGINE=log`;
 * a hand-built composition adds `PgLogOutbox.layer`.
 *
 * @since 0.1.0
 * @category errors
 */
export class LogEngineUnavailableError extends Schema.TaggedError<LogEngineUnavailableError>()(
  "LogEngineUnavailableError",
  { missing: Schema.Array(Schema.String) }
) {
  override get message() {
    return (
      `the log engine is selected (OUTBOX_ENGINE=log) but ${this.missing.join(" and ")} ` +
      "is not provided: build the storage with PgOutbox.layerConfig (it reads OUTBOX_ENGINE) " +
      "or add PgLogOutbox.layer to the composition"
    )
  }
}
