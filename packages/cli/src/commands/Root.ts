/**
 * The root of the `effect-outbox` command tree: the connection and output flags every command
 * shares, the services they connect to, and how a command's result is printed.
 *
 * @since 0.1.0
 */
import { PgClient } from "@effect/sql-pg"
import type * as KafkaBrokerAdmin from "@effect-outbox/adapter-kafka/KafkaBrokerAdmin"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as StartupCheck from "@effect-outbox/core/StartupCheck"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import { CliError, Command, Flag } from "effect/cli"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Operations from "../Operations.ts"

// -- shared flags and connections ------------------------------------------------------------

/**
 * The root command: the shared connection and output flags.
 *
 * @since 0.1.0
 * @category commands
 */
export const root = Command.make("effect-outbox").pipe(
  Command.withDescription(
    "Operate an effect-outbox: inspect, requeue, skip, release, recover, replay dead letters, purge."
  ),
  Command.withSharedFlags({
    databaseUrl: Flag.Redacted("database-url").pipe(
      Flag.withDescription("PostgreSQL connection string (default: $DATABASE_URL)"),
      Flag.withFallbackConfig(Config.Redacted("DATABASE_URL")),
      Flag.optional
    ),
    schema: Flag.String("schema").pipe(
      Flag.withDescription("schema of the outbox tables (default: $OUTBOX_SCHEMA or outbox)"),
      Flag.withFallbackConfig(Config.String("OUTBOX_SCHEMA")),
      Flag.withDefault("outbox")
    ),
    tablePrefix: Flag.String("table-prefix").pipe(
      Flag.withDescription("table name prefix (default: $OUTBOX_TABLE_PREFIX or outbox_)"),
      Flag.withFallbackConfig(Config.String("OUTBOX_TABLE_PREFIX")),
      Flag.withDefault("outbox_")
    ),
    brokers: Flag.String("brokers").pipe(
      Flag.withDescription("Kafka brokers, comma separated (default: $KAFKA_BROKERS); for dlt and recover-stale"),
      Flag.withFallbackConfig(Config.String("KAFKA_BROKERS")),
      Flag.optional
    ),
    brokerTimeout: Flag.String("broker-timeout").pipe(
      Flag.withDescription(
        "how long a broker command waits for the brokers' first answer (default: $OUTBOX_BROKER_STARTUP_TIMEOUT or 10s)"
      ),
      Flag.withFallbackConfig(Config.String("OUTBOX_BROKER_STARTUP_TIMEOUT")),
      Flag.withDefault("10s")
    ),
    json: Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))
  })
)

/**
 * The values of the root flags.
 *
 * @since 0.1.0
 * @category models
 */
export interface RootConfig {
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly schema: string
  readonly tablePrefix: string
  readonly brokers: Option.Option<string>
  readonly brokerTimeout: string
  readonly json: boolean
}

/**
 * An operator error as the CLI reports it (its message, exit code 1).
 *
 * @since 0.1.0
 * @category errors
 */
export const userError = (error: { readonly message: string }) =>
  new CliError.UserError({ cause: error, userMessage: error.message })

/**
 * The PostgreSQL services for the root flags: the store (recording transitions), wake-up, read model.
 *
 * @since 0.1.0
 * @category layers
 */
export const database = (config: {
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly schema: string
  readonly tablePrefix: string
}) =>
  Layer.unwrap(
    Effect.gen(function* () {
      if (Option.isNone(config.databaseUrl)) {
        return yield* new Operations.OperatorError({ reason: "no database: pass --database-url or set DATABASE_URL" })
      }
      // PgOutbox.layer carries the read model (PgReadModel) with the store.
      return PgOutbox.layer({
        schema: config.schema,
        tablePrefix: config.tablePrefix,
        // An operator tool never changes the schema; it reads what the services migrated.
        migrate: false,
        store: { recordTransitions: true },
        wakeUp: { notify: true, listen: false }
      }).pipe(
        Layer.provideMerge(
          PgClient.layer({
            url: config.databaseUrl.value,
            maxConnections: 2,
            applicationName: "effect-outbox-cli"
          })
        )
      )
    })
  )

/**
 * The Kafka services for the root flags.
 *
 * @since 0.1.0
 * @category layers
 */
export const broker = (
  config: { readonly brokers: Option.Option<string> },
  admin: KafkaBrokerAdmin.KafkaBrokerAdminOptions = {}
) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const brokers = Option.getOrElse(config.brokers, () => "")
        .split(",")
        .map((b) => b.trim())
        .filter((b) => b !== "")
      if (brokers.length === 0) {
        return yield* new Operations.OperatorError({ reason: "no Kafka: pass --brokers or set KAFKA_BROKERS" })
      }
      return KafkaOutbox.layer({ brokers, clientId: "effect-outbox-cli" }, { admin })
    })
  )

/**
 * {@link broker}, built only once the brokers answered within `--broker-timeout`: an unreachable
 * broker fails the command in that time with one error naming the brokers and the cause,
 * instead of each call retrying on its own.
 *
 * @since 0.1.0
 * @category layers
 */
export const reachableBroker = (
  config: { readonly brokers: Option.Option<string>; readonly brokerTimeout: string },
  adminOptions: KafkaBrokerAdmin.KafkaBrokerAdminOptions = {}
) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const timeout = parseDuration(config.brokerTimeout)
      if (Option.isNone(timeout)) {
        return yield* new Operations.OperatorError({
          reason: `--broker-timeout "${config.brokerTimeout}" is not a duration (try 10s, 1m)`
        })
      }
      const answered = Layer.effectDiscard(
        Effect.gen(function* () {
          const admin = yield* BrokerAdmin
          if (admin.listTopics === undefined) return
          const brokers = (admin.brokers ?? []).join(",")
          yield* StartupCheck.listTopics(admin.listTopics, brokers, Duration.millis(timeout.value))
        })
      )
      return Layer.provideMerge(answered, broker(config, adminOptions))
    })
  )

const print = <A>(json: boolean, value: A, human: (value: A) => string) =>
  Console.log(json ? JSON.stringify(value, jsonReplacer, 2) : human(value))

// Payload bytes print as base64 in JSON; everything else as it is.
const jsonReplacer = (_key: string, value: unknown) =>
  value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value

/**
 * Runs `effect` with the database services of the root flags, printing the result.
 *
 * @since 0.1.0
 * @category running
 */
export const withDatabase = <A, E, R>(effect: Effect.Effect<A, E, R>, human: (value: A) => string) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(database(config)))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

/**
 * As {@link withDatabase}, with the Kafka services too.
 *
 * @since 0.1.0
 * @category running
 */
export const withDatabaseAndBroker = <A, E, R>(effect: Effect.Effect<A, E, R>, human: (value: A) => string) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(Layer.merge(database(config), reachableBroker(config))))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

/**
 * Runs `effect` with the Kafka services of the root flags, printing the result.
 *
 * @since 0.1.0
 * @category running
 */
export const withBroker = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  human: (value: A) => string,
  adminOptions: KafkaBrokerAdmin.KafkaBrokerAdminOptions = {}
) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(reachableBroker(config, adminOptions)))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

// -- flags shared by requeue and release -----------------------------------------------------

/**
 * The flags that select rows, shared by requeue, skip and release.
 *
 * @since 0.1.0
 * @category flags
 */
export const selectionFlags = {
  ids: Flag.String("id").pipe(Flag.withDescription("an event id (repeatable)"), Flag.between(0, 10_000)),
  topic: Flag.String("topic").pipe(Flag.withDescription("only this topic"), Flag.optional),
  createdBefore: Flag.Date("created-before").pipe(
    Flag.withDescription("only rows created before this time (ISO 8601)"),
    Flag.optional
  ),
  all: Flag.Boolean("all").pipe(
    Flag.withDescription("every row in the status (no other filter)"),
    Flag.withDefault(false)
  ),
  limit: Flag.Int("limit").pipe(Flag.withDescription("at most this many rows"), Flag.withDefault(100)),
  operator: Flag.String("operator").pipe(
    Flag.withDescription("who does this, for the audit log (default: $USER)"),
    Flag.withFallbackConfig(Config.String("USER")),
    Flag.withDefault("unknown-operator")
  ),
  execute: Flag.Boolean("execute").pipe(
    Flag.withDescription("apply the change (default: dry run)"),
    Flag.withDefault(false)
  )
}

/**
 * The parsed selection flags as an `Operations.Selection`.
 *
 * @since 0.1.0
 * @category flags
 */
export const selection = (input: {
  readonly ids: ReadonlyArray<string>
  readonly topic: Option.Option<string>
  readonly createdBefore: Option.Option<Date>
  readonly all: boolean
  readonly limit: number
}): Operations.Selection => ({
  ids: input.ids,
  topic: Option.getOrUndefined(input.topic),
  createdBefore: Option.getOrUndefined(Option.map(input.createdBefore, (d) => d.getTime())),
  all: input.all,
  limit: input.limit
})

/**
 * `7d`, `12h`, `30m`, `45s`, `500ms`, or anything `Duration` reads (`"7 days"`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseDuration = (text: string): Option.Option<number> => {
  const short = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$/i.exec(text)
  if (short !== null) {
    const n = Number(short[1])
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[
      short[2]!.toLowerCase() as "ms"
    ]
    return Option.some(n * unit)
  }
  return Option.map(Duration.fromInput(text.trim() as Duration.Input), Duration.toMillis).pipe(
    Option.filter((ms) => Number.isFinite(ms) && ms >= 0)
  )
}
