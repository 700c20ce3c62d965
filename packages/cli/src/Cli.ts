/**
 * The `effect-outbox` command tree (Effect's CLI module). Connection flags are shared by every
 * command and fall back to the environment: `--database-url` / `DATABASE_URL`, `--schema` /
 * `OUTBOX_SCHEMA`, `--table-prefix` / `OUTBOX_TABLE_PREFIX`, `--brokers` / `KAFKA_BROKERS`.
 * Mutating commands are dry runs unless `--execute` is given.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import { Argument, CliError, Command, Flag } from "effect/cli"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Dashboard from "./Dashboard.ts"
import * as DashboardGuard from "./DashboardGuard.ts"
import * as Operations from "./Operations.ts"
import * as ReadModel from "./ReadModel.ts"
import * as Render from "./Render.ts"

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
    json: Flag.Boolean("json").pipe(Flag.withDescription("print machine-readable JSON"), Flag.withDefault(false))
  })
)

interface RootConfig {
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly schema: string
  readonly tablePrefix: string
  readonly brokers: Option.Option<string>
  readonly json: boolean
}

const userError = (error: { readonly message: string }) =>
  new CliError.UserError({ cause: error, userMessage: error.message })

/** The PostgreSQL services for the root flags: the store (recording transitions), wake-up, read model. */
const database = (config: {
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly schema: string
  readonly tablePrefix: string
}) =>
  Layer.unwrap(
    Effect.gen(function* () {
      if (Option.isNone(config.databaseUrl)) {
        return yield* new Operations.OperatorError({ reason: "no database: pass --database-url or set DATABASE_URL" })
      }
      return ReadModel.layerPg.pipe(
        Layer.provideMerge(
          PgOutbox.layer({
            schema: config.schema,
            tablePrefix: config.tablePrefix,
            // An operator tool never changes the schema; it reads what the services migrated.
            migrate: false,
            store: { recordTransitions: true },
            wakeUp: { notify: true, listen: false }
          })
        ),
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

const broker = (config: { readonly brokers: Option.Option<string> }) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const brokers = Option.getOrElse(config.brokers, () => "")
        .split(",")
        .map((b) => b.trim())
        .filter((b) => b !== "")
      if (brokers.length === 0) {
        return yield* new Operations.OperatorError({ reason: "no Kafka: pass --brokers or set KAFKA_BROKERS" })
      }
      return KafkaOutbox.layer({ brokers, clientId: "effect-outbox-cli" })
    })
  )

const print = <A>(json: boolean, value: A, human: (value: A) => string) =>
  Console.log(json ? JSON.stringify(value, jsonReplacer, 2) : human(value))

// Payload bytes print as base64 in JSON; everything else as it is.
const jsonReplacer = (_key: string, value: unknown) =>
  value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value

/** Runs `effect` with the database services of the root flags, printing the result. */
const withDatabase = <A, E, R>(effect: Effect.Effect<A, E, R>, human: (value: A) => string) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(database(config)))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

const withDatabaseAndBroker = <A, E, R>(effect: Effect.Effect<A, E, R>, human: (value: A) => string) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(Layer.merge(database(config), broker(config))))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

const withBroker = <A, E, R>(effect: Effect.Effect<A, E, R>, human: (value: A) => string) =>
  Effect.gen(function* () {
    const config: RootConfig = yield* root
    const value = yield* effect.pipe(Effect.provide(broker(config)))
    yield* print(config.json, value, human)
  }).pipe(Effect.mapError((error) => userError(error as { readonly message: string })))

// -- flags shared by requeue and release -----------------------------------------------------

const selectionFlags = {
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

const selection = (input: {
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

// -- commands --------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category commands
 */
export const status = Command.make(
  "status",
  {
    topic: Flag.String("topic").pipe(Flag.withDescription("only this topic"), Flag.optional),
    failures: Flag.Int("failures").pipe(Flag.withDescription("recent failures to list"), Flag.withDefault(10)),
    stuckAfter: Flag.String("stuck-after").pipe(
      Flag.withDescription("list UNDER_PROCESSING rows not updated for this long (default 15m)"),
      Flag.withDefault("15m")
    ),
    groups: Flag.String("group").pipe(
      Flag.withDescription("a consumer group whose lag on the outbox's topics to show (repeatable; needs --brokers)"),
      Flag.between(0, 100)
    ),
    deadLetters: Flag.Boolean("dead-letters").pipe(
      Flag.withDescription("dead letters on each topic's <topic>.DLT, and how many are not replayed (needs --brokers)"),
      Flag.withDefault(false)
    )
  },
  (input) => {
    const stuckAfterMillis = parseDuration(input.stuckAfter)
    if (Option.isNone(stuckAfterMillis)) {
      return Effect.fail(
        userError(
          new Operations.OperatorError({
            reason: `--stuck-after "${input.stuckAfter}" is not a duration (try 15m, 1h)`
          })
        )
      )
    }
    const report = Operations.status({
      topic: Option.getOrUndefined(input.topic),
      failures: input.failures,
      stuckAfterMillis: stuckAfterMillis.value
    })
    return input.groups.length === 0 && !input.deadLetters
      ? withDatabase(report, Render.status)
      : withDatabaseAndBroker(
          Effect.gen(function* () {
            const status = yield* report
            const topics = status.topics.map((t) => t.topic)
            const consumerLag =
              input.groups.length === 0 ? undefined : yield* Operations.consumerLag({ groups: input.groups, topics })
            const deadLetters = input.deadLetters ? yield* Operations.deadLetterDepth(topics) : undefined
            return {
              ...status,
              ...(consumerLag === undefined ? {} : { consumerLag }),
              ...(deadLetters === undefined ? {} : { deadLetters })
            } satisfies Operations.Status
          }),
          Render.status
        )
  }
).pipe(
  Command.withDescription(
    "counts by status and topic, oldest pending age, stale leases, stuck rows, failures; with --group, consumer lag; with --dead-letters, dead letters not yet replayed"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const inspect = Command.make(
  "inspect",
  {
    id: Argument.String("event-id").pipe(Argument.withDescription("the event id"))
  },
  (input) => withDatabase(Operations.inspect(input.id), Render.inspection)
).pipe(Command.withDescription("one event: row, receipt, transition history, consumers that processed it"))

/**
 * @since 0.1.0
 * @category commands
 */
export const requeue = Command.make(
  "requeue",
  {
    ...selectionFlags,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit log (required)"), Flag.withDefault(""))
  },
  (input) =>
    withDatabase(
      Operations.requeue({
        ...selection(input),
        operator: input.operator,
        reason: input.reason,
        execute: input.execute
      }),
      Render.change
    )
).pipe(Command.withDescription("FAILURE -> PENDING for the selected rows (audited; dry run unless --execute)"))

/**
 * @since 0.2.0
 * @category commands
 */
export const skip = Command.make(
  "skip",
  {
    ...selectionFlags,
    reason: Flag.String("reason").pipe(Flag.withDescription("why, for the audit log (required)"), Flag.withDefault(""))
  },
  (input) =>
    withDatabase(
      Operations.skip({
        ...selection(input),
        operator: input.operator,
        reason: input.reason,
        execute: input.execute
      }),
      Render.change
    )
).pipe(
  Command.withDescription(
    "FAILURE -> SKIPPED for the selected rows: give up on them so their keys go on (audited; dry run unless --execute)"
  )
)

/**
 * @since 0.1.0
 * @category commands
 */
export const release = Command.make("release", selectionFlags, (input) =>
  withDatabase(
    Operations.release({ ...selection(input), operator: input.operator, execute: input.execute }),
    Render.change
  )
).pipe(Command.withDescription("PREQUEUED -> PENDING for the selected rows (dry run unless --execute)"))

/**
 * @since 0.1.0
 * @category commands
 */
export const recoverStale = Command.make(
  "recover-stale",
  {
    limit: Flag.Int("limit").pipe(Flag.withDescription("stale rows per round"), Flag.withDefault(100)),
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      if (!input.execute) return yield* withDatabase(Operations.listStale({ limit: input.limit }), Render.stale)
      return yield* withDatabaseAndBroker(Operations.recoverStale({ limit: input.limit }), Render.stale)
    })
).pipe(Command.withDescription("expired DISPATCHING leases: probe the broker, then mark published or requeue"))

const dltList = Command.make(
  "list",
  {
    topic: Argument.String("dead-letter-topic").pipe(Argument.withDescription("e.g. orders.DLT")),
    limit: Flag.Int("limit").pipe(Flag.withDescription("at most this many"), Flag.withDefault(1000))
  },
  (input) => withBroker(Operations.deadLetters(input.topic, { limit: input.limit }), Render.deadLetters)
).pipe(Command.withDescription("the dead letters of a dead-letter topic, with their errors"))

const dltReplay = Command.make(
  "replay",
  {
    topic: Argument.String("dead-letter-topic").pipe(Argument.withDescription("e.g. orders.DLT")),
    eventIds: Flag.String("event-id").pipe(
      Flag.withDescription("replay this event (repeatable)"),
      Flag.between(0, 10_000)
    ),
    all: Flag.Boolean("all").pipe(Flag.withDescription("replay every dead letter"), Flag.withDefault(false)),
    to: Flag.String("to").pipe(Flag.withDescription("republish here instead of the original topic"), Flag.optional),
    execute: selectionFlags.execute
  },
  (input) =>
    withBroker(
      Operations.replay({
        from: input.topic,
        eventIds: input.eventIds,
        all: input.all,
        to: Option.getOrUndefined(input.to),
        execute: input.execute
      }),
      Render.replay
    )
).pipe(Command.withDescription("republish selected dead letters to their original topic (dry run unless --execute)"))

/**
 * @since 0.1.0
 * @category commands
 */
export const dlt = Command.make("dlt").pipe(
  Command.withDescription("dead letters: list, replay"),
  Command.withSubcommands([dltList, dltReplay])
)

const parkedList = Command.make(
  "list",
  { group: Flag.String("group").pipe(Flag.withDescription("only this consumer group"), Flag.optional) },
  (input) => withDatabase(Operations.parkedList({ group: Option.getOrUndefined(input.group) }), Render.parked)
).pipe(Command.withDescription("parked keys (durable parking): group, partition, key, parked offsets head first"))

const parkedRelease = Command.make(
  "release",
  {
    group: Flag.String("group").pipe(Flag.withDescription("the consumer group")),
    topic: Flag.String("topic").pipe(Flag.withDescription("the key's topic")),
    partition: Flag.Int("partition").pipe(Flag.withDescription("the key's partition")),
    key: Flag.String("key").pipe(Flag.withDescription("the parked key")),
    execute: selectionFlags.execute
  },
  (input) =>
    withDatabase(
      Operations.parkedRelease({
        consumer: input.group,
        topic: input.topic,
        partition: input.partition,
        key: input.key,
        execute: input.execute
      }),
      Render.parkedRelease
    )
).pipe(
  Command.withDescription(
    "ask the consumer that owns the partition to run a parked key's records, head first (dry run unless --execute)"
  )
)

/**
 * @since 0.2.0
 * @category commands
 */
export const parked = Command.make("parked").pipe(
  Command.withDescription("durably parked keys: list, release"),
  Command.withSubcommands([parkedList, parkedRelease])
)

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

/**
 * @since 0.1.0
 * @category commands
 */
export const purge = Command.make(
  "purge",
  {
    olderThan: Flag.String("older-than").pipe(Flag.withDescription('age of the last update, e.g. 7d, 12h, "30 days"')),
    statuses: Flag.String("status").pipe(
      Flag.withDescription("finished statuses to purge, comma separated (default SUCCESS,PUSHED_FAILURE,PUBLISHED)"),
      Flag.withDefault("SUCCESS,PUSHED_FAILURE,PUBLISHED")
    ),
    execute: selectionFlags.execute
  },
  (input) =>
    Effect.gen(function* () {
      const olderThan = parseDuration(input.olderThan)
      if (Option.isNone(olderThan)) {
        return yield* userError(
          new Operations.OperatorError({
            reason: `--older-than "${input.olderThan}" is not a duration (try 7d, 12h, "30 days")`
          })
        )
      }
      const statuses = input.statuses
        .split(",")
        .map((s) => s.trim().toUpperCase())
        .filter((s) => s !== "")
      const unknown = statuses.filter((s) => !(Lifecycle.statuses as ReadonlyArray<string>).includes(s))
      if (unknown.length > 0) {
        return yield* userError(new Operations.OperatorError({ reason: `unknown status ${unknown.join(", ")}` }))
      }
      yield* withDatabase(
        Operations.purge({
          olderThanMillis: olderThan.value,
          statuses: statuses as Array<Lifecycle.OutboxStatus>,
          execute: input.execute
        }),
        Render.purge
      )
    })
).pipe(
  Command.withDescription("delete finished rows older than a duration, in bounded batches (dry run unless --execute)")
)

/**
 * The dashboard on `--host:--port` until interrupted; prints its address. Beyond loopback it
 * needs `--token` (or `OUTBOX_DASHBOARD_TOKEN`).
 *
 * @since 0.2.0
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
      Flag.withFallbackConfig(Config.Redacted("OUTBOX_DASHBOARD_TOKEN")),
      Flag.optional
    ),
    readOnly: Flag.Boolean("read-only").pipe(
      Flag.withDescription("show, never change: no repair or replay"),
      Flag.withDefault(false)
    ),
    groups: Flag.String("group").pipe(
      Flag.withDescription("a consumer group whose lag to show (repeatable)"),
      Flag.between(0, 100)
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
        groups: input.groups
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

/**
 * The whole tree.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = root.pipe(
  Command.withSubcommands([status, inspect, requeue, skip, release, recoverStale, dlt, parked, purge, dashboard])
)

/**
 * Runs the CLI on `args` (without the `node` and script entries).
 *
 * @since 0.1.0
 * @category running
 */
export const run = Command.runWith(command, { version: "0.1.0" })
