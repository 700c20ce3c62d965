/**
 * The demo as one program: read the configuration, say what it runs against, run the flow on
 * those services, print the summary, and answer the process exit code.
 *
 * @since 0.1.0
 */
import * as KafkaBrokerAdmin from "@effect-outbox/adapter-kafka/KafkaBrokerAdmin"
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as Dashboard from "@effect-outbox/cli/Dashboard"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { HttpServer } from "effect/http"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import * as Demo from "./Demo.ts"
import * as Services from "./Services.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface RunOptions extends Partial<Omit<Demo.Options, "schema" | "topic" | "groupId">> {
  readonly selection: Services.Selection
  /** Isolates this run's tables, topics and consumer group (default: random). */
  readonly runId?: string | undefined
  /** Where the header and summary go (default: standard output). */
  readonly write?: ((text: string) => void) | undefined
  /**
   * Keep the run's schema and topics on real services afterwards (default `false`: a demo
   * leaves a shared database and cluster as it found them).
   */
  readonly keep?: boolean | undefined
  /**
   * Serve the operator dashboard on 127.0.0.1 while the demo runs, on this port (0: a free one),
   * and print its address; `undefined` (the default): no dashboard.
   */
  readonly dashboardPort?: number | undefined
}

/**
 * Builds the services for `selection` and runs the demo on them: the summary of one run.
 *
 * @since 0.1.0
 * @category running
 */
export const runDemo = (options: RunOptions) =>
  Effect.gen(function* () {
    const write = options.write ?? ((text: string) => void process.stdout.write(text))
    const runId = options.runId ?? Math.random().toString(36).slice(2, 10)
    // A server may hold other runs' data: each run gets its own schema and topics there.
    const schema = `effect_outbox_demo_${runId}`
    const engine = options.engine ?? "claim"
    if (engine === "log" && options.selection.databaseUrl === undefined) {
      return yield* Effect.fail(new Error(Services.logEngineNeedsServer))
    }
    if (engine === "log" && options.selection.databaseUrl !== undefined) {
      yield* Services.requireLogical(options.selection.databaseUrl)
    }
    for (const line of Services.describe(options.selection)) write(`${line}\n`)
    write(
      engine === "claim"
        ? "engine:   claim (relays claim outbox rows; --engine log reads the WAL instead)\n"
        : `engine:   log (one relay streams the WAL from slot ${Services.slotOf(schema)})\n`
    )
    const services = Layer.merge(
      Services.database(options.selection, schema, engine),
      Services.broker(options.selection)
    )
    // The dashboard reads and repairs through the same services (one build: the layer is shared).
    const layer =
      options.dashboardPort === undefined
        ? services
        : Layer.merge(
            services,
            // PgOutbox.layer carries the dashboard's read model (PgReadModel) too
            Dashboard.layer({ port: options.dashboardPort }).pipe(Layer.provide(services))
          )
    const {
      keep = false,
      selection: _selection,
      runId: _runId,
      write: _write,
      dashboardPort: _dashboardPort,
      ...rest
    } = options
    const topic = `effect-outbox-demo.${runId}.orders`
    const cleanup = Effect.gen(function* () {
      if (keep) return
      if (engine === "log") yield* Effect.ignore(PgLogSource.dropSlot({ slot: Services.slotOf(schema) }))
      if (options.selection.databaseUrl !== undefined) {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      }
      const kafka = yield* Effect.serviceOption(KafkaClient.KafkaClient)
      if (Option.isSome(kafka)) yield* KafkaBrokerAdmin.deleteTopics(kafka.value.admin, [topic, `${topic}.DLT`])
    })
    const announceDashboard = Effect.gen(function* () {
      const server = yield* Effect.serviceOption(HttpServer.HttpServer)
      if (Option.isSome(server)) {
        write(`dashboard: ${HttpServer.formatAddress(server.value.address)}/ (while the demo runs)\n`)
      }
    })
    const summary = yield* Demo.run({
      ...Demo.defaults,
      pollInterval: Services.pollInterval(options.selection),
      ...rest,
      progress: { ...(options.write === undefined ? {} : { write: options.write }), ...rest.progress },
      schema,
      topic,
      groupId: `effect-outbox-demo-${runId}-billing`
    }).pipe(Effect.ensuring(cleanup), (run) => Effect.andThen(announceDashboard, run), Effect.provide(layer))
    write(`${Demo.renderSummary(summary)}\n`)
    if (keep && options.selection.databaseUrl !== undefined) {
      write(`\nkept schema ${schema} and topic ${topic}: look with \`pnpm outbox status --schema ${schema}\`\n`)
    }
    return summary
  })

/**
 * `DEMO_ORDERS` (default 200), `DEMO_TIMEOUT` (default 2 minutes), `DEMO_LOG_LEVEL` (default
 * `Warn`), `DEMO_KEEP` (keep the run's schema and topics on real services), `DEMO_DASHBOARD`
 * (default `true`: serve the operator dashboard on 127.0.0.1 while it runs, on
 * `DEMO_DASHBOARD_PORT`, default 0 = a free port), plus `DATABASE_URL` / `KAFKA_BROKERS`. The engine:
 * `--engine log` or `OUTBOX_ENGINE=log` (on `LOGICAL_DATABASE_URL`, else `DATABASE_URL`).
 *
 * @since 0.1.0
 * @category running
 */
export const program: Effect.Effect<number, unknown> = Effect.gen(function* () {
  const engine = yield* Services.engine(process.argv.slice(2))
  const configured = yield* Services.selection
  const selection = engine === "log" ? yield* Services.logicalSelection(configured) : configured
  if (engine === "log" && selection.databaseUrl === undefined) {
    process.stderr.write(`demo: ${Services.logEngineNeedsServer}\n`)
    return 2
  }
  const orders = yield* Config.Int("DEMO_ORDERS").pipe(Config.withDefault(Demo.defaults.orders))
  const timeout = yield* Config.Duration("DEMO_TIMEOUT").pipe(Config.withDefault(Demo.defaults.timeout))
  const logLevel = yield* Config.LogLevel("DEMO_LOG_LEVEL").pipe(Config.withDefault("Warn" as const))
  const keep = yield* Config.Boolean("DEMO_KEEP").pipe(Config.withDefault(false))
  const dashboard = yield* Config.Boolean("DEMO_DASHBOARD").pipe(Config.withDefault(true))
  const dashboardPort = yield* Config.Int("DEMO_DASHBOARD_PORT").pipe(Config.withDefault(0))
  process.stdout.write(
    `effect-outbox demo: ${orders} orders through a transactional outbox, a relay and an idempotent consumer\n`
  )
  const summary = yield* runDemo({
    selection,
    engine,
    orders,
    keep,
    timeout: Duration.fromInputUnsafe(timeout),
    dashboardPort: dashboard ? dashboardPort : undefined
  }).pipe(Effect.provideService(References.MinimumLogLevel, logLevel))
  return summary.problems.length === 0 ? 0 : 1
})
