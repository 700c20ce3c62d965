/**
 * The `dashboard` command: the operations on a web page.
 *
 * @since 0.1.0
 */
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import { Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Dashboard from "../Dashboard.ts"
import * as DashboardGuard from "../DashboardGuard.ts"
import { variables } from "../internal/variables.ts"
import { broker, database, type RootConfig, root, userError } from "./Root.ts"

/**
 * The dashboard on `--host:--port` until interrupted; prints its address. Beyond loopback it
 * needs `--token` (or `OUTBOX_DASHBOARD_TOKEN`).
 *
 * @since 0.1.0
 * @category commands
 */
export const dashboard = Command.make(
  "dashboard",
  {
    host: Flag.String("host").pipe(
      Flag.withDescription("address to listen on (default 127.0.0.1; any other needs --token)"),
      Flag.withDefault("127.0.0.1")
    ),
    port: Flag.Int("port").pipe(
      Flag.withDescription("port (default 7070; 0 picks a free one)"),
      Flag.withDefault(7070)
    ),
    token: Flag.Redacted("token").pipe(
      Flag.withDescription("access token, required beyond loopback (default: $OUTBOX_DASHBOARD_TOKEN)"),
      Flag.withFallbackConfig(variables.dashboardToken.config),
      Flag.optional
    ),
    readOnly: Flag.Boolean("read-only").pipe(
      Flag.withDescription("show, never change: no repair or replay"),
      Flag.withDefault(false)
    ),
    groups: Flag.String("group").pipe(
      Flag.withDescription("a consumer group whose lag to show (repeatable)"),
      Flag.between(0, 100)
    ),
    logSlot: Flag.String("log-slot").pipe(
      Flag.withDescription("the log relay's slot the log page shows (default: $OUTBOX_LOG_SLOT or effect_outbox_log)"),
      Flag.withFallbackConfig(Config.String("OUTBOX_LOG_SLOT")),
      Flag.withDefault(PgLogSource.defaultSlot)
    )
  },
  (input) =>
    Effect.gen(function* () {
      const config: RootConfig = yield* root
      const options = {
        host: input.host,
        port: input.port,
        token: Option.getOrUndefined(Option.map(input.token, Redacted.value)),
        readOnly: input.readOnly,
        groups: input.groups,
        logSlot: input.logSlot
      }
      // An unsafe address is refused before any connection is made.
      const unsafe = DashboardGuard.validate({ host: options.host, token: options.token, readOnly: options.readOnly })
      if (unsafe !== undefined) return yield* unsafe
      const services = Layer.merge(database(config), broker(config))
      const server = Dashboard.layer(options).pipe(Layer.provide(services))
      yield* Effect.gen(function* () {
        yield* Console.log(`effect-outbox dashboard: ${yield* Dashboard.url()}/${input.readOnly ? " (read-only)" : ""}`)
        return yield* Effect.never
      }).pipe(Effect.provide(server))
    }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))
).pipe(
  Command.withDescription(
    "the operations on a web page (overview, rows, dead letters, repairs), on 127.0.0.1 by default"
  )
)
