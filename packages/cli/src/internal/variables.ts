/**
 * The environment variables only the CLI reads (docs/configuration.md is generated from this
 * table). Its connection flags fall back to the adapters' own variables (`DATABASE_URL`,
 * `OUTBOX_SCHEMA`, `OUTBOX_TABLE_PREFIX`, `KAFKA_BROKERS`).
 */
import * as EnvVariable from "@effect-outbox/core/EnvVariable"

export const variables = EnvVariable.table(
  { package: "cli", title: "CLI" },
  {
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
