/**
 * The environment variables only the CLI reads (docs/configuration.md is generated from this
 * table). Its connection flags fall back to the adapters' own variables (`DATABASE_URL`,
 * `OUTBOX_SCHEMA`, `OUTBOX_TABLE_PREFIX`, `KAFKA_BROKERS`).
 */
import * as EnvVariable from "@effect-outbox/core/EnvVariable"
import * as Config from "effect/Config"

export const variables = EnvVariable.table(
  { package: "cli", title: "CLI" },
  {
    logLevel: EnvVariable.make({
      name: "OUTBOX_LOG_LEVEL",
      type: "log level (`Debug`, `Info`, `Warn`, `Error`, …)",
      default: "`Warn`",
      description: "how much the CLI logs (to standard error)",
      config: Config.LogLevel("OUTBOX_LOG_LEVEL").pipe(Config.withDefault("Warn" as const))
    }),
    // read as the `--token` flag's fallback, which is optional itself
    dashboardToken: EnvVariable.make({
      ...EnvVariable.secret(
        "OUTBOX_DASHBOARD_TOKEN",
        "the dashboard's access token (`--token`), required beyond loopback"
      ),
      default: "unset: no token, the dashboard listens on loopback only"
    })
  }
)
