/**
 * Shared plumbing of the fault tests: the real services, a per-test schema and topics, a
 * library stack (PostgreSQL outbox + Kafka ports) as a ManagedRuntime, child processes, and the
 * checker that reads the topic and the tables at the end.
 */

import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { inspect } from "node:util"
import { PgClient } from "@effect/sql-pg"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import * as Consumer from "@effect-outbox/core/Consumer"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

export const here = dirname(fileURLToPath(import.meta.url))
export const repoRoot = join(here, "..", "..", "..", "..")

/**
 * The port of a private broker or cluster a fault file starts: `process.env[name]`, else `base`,
 * shifted by 1000 per vitest worker (`VITEST_POOL_ID`), so that two files running side by side
 * never start, stop or wipe each other's private services, whether or not the port is set.
 */
export const privatePort = (name: string, base: number): number => {
  const configured = process.env[name]
  const port = configured !== undefined && configured !== "" ? Number(configured) : base
  const worker = Number(process.env.VITEST_POOL_ID ?? 1)
  return port + 1000 * (Number.isInteger(worker) && worker > 1 ? worker - 1 : 0)
}
export const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
export const sharedBrokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",").map((b) => b.trim())

export const uniqueName = (prefix: string): string =>
  `${prefix}_${Date.now().toString(36)}${randomBytes(3).toString("hex")}`
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

export const kafka = (brokers: ReadonlyArray<string> = sharedBrokers): Kafkajs.Kafka =>
  new Kafkajs.Kafka({
    clientId: "faults",
    brokers: [...brokers],
    logLevel: Kafkajs.logLevel.NOTHING,
    retry: { retries: 8 }
  })

export const createTopics = async (
  brokers: ReadonlyArray<string>,
  topics: ReadonlyArray<string>,
  partitions = 3
): Promise<void> => {
  const admin = kafka(brokers).admin()
  await admin.connect()
  try {
    await admin.createTopics({
      topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
      waitForLeaders: true
    })
  } finally {
    await admin.disconnect()
  }
}

export const deleteTopics = async (brokers: ReadonlyArray<string>, topics: ReadonlyArray<string>): Promise<void> => {
  const admin = kafka(brokers).admin()
  await admin.connect().catch(() => undefined)
  await admin.deleteTopics({ topics: [...topics], timeout: 15_000 }).catch(() => undefined)
  await admin.disconnect().catch(() => undefined)
}

/** PostgreSQL outbox (migrated into `schema`) + every Kafka port, at WARN. */
export const stackLayer = (options: {
  readonly schema: string
  readonly brokers?: ReadonlyArray<string>
  readonly applicationName?: string
  readonly maxConnections?: number
  /** Another PostgreSQL (a private cluster); default `DATABASE_URL`. */
  readonly databaseUrl?: string
}) => {
  const client = PgClient.layer({
    url: Redacted.make(options.databaseUrl ?? databaseUrl),
    maxConnections: options.maxConnections ?? 4,
    applicationName: options.applicationName ?? "effect-outbox-faults"
  })
  const pg = PgOutbox.layer({ schema: options.schema }).pipe(Layer.provideMerge(client))
  const broker = KafkaOutbox.layer(
    { brokers: options.brokers ?? sharedBrokers, clientId: "faults", connectionTimeout: 3_000, requestTimeout: 10_000 },
    { publisher: { publishTimeoutMillis: 8_000 }, consumer: { sessionTimeoutMillis: 10_000, maxWaitTimeMillis: 200 } }
  )
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.FAULTS_LOG_LEVEL ?? "Error") as LogLevel.LogLevel
  )
  return Layer.mergeAll(Outbox.layerWith({ maxPayloadBytes: 1_000_000 }), Inbox.Inbox.layer).pipe(
    Layer.provideMerge(Layer.merge(pg, broker)),
    Layer.provideMerge(logLevel)
  )
}

export type Stack = ManagedRuntime.ManagedRuntime<Layer.Success<ReturnType<typeof stackLayer>>, unknown>

export const makeStack = async (options: Parameters<typeof stackLayer>[0]): Promise<Stack> => {
  const runtime = ManagedRuntime.make(stackLayer(options))
  await runtime.runPromise(Effect.void)
  return runtime as Stack
}

export const payloadOf = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value))

/** Enqueues `n` events (`seq` i, key `k<i % keys>`) in transactions of `chunk`; returns ids in order. */
export const enqueueMany = (
  stack: Stack,
  topic: string,
  n: number,
  options: { readonly keys?: number; readonly chunk?: number; readonly from?: number } = {}
): Promise<ReadonlyArray<string>> =>
  stack.runPromise(
    Effect.gen(function* () {
      const ids: Array<string> = []
      const chunk = options.chunk ?? 500
      const from = options.from ?? 0
      for (let i = 0; i < n; i += chunk) {
        const drafts: Array<OutboxDraft> = Array.from({ length: Math.min(chunk, n - i) }, (_, j) => {
          const index = from + i + j
          return {
            topic,
            key: `k${index % (options.keys ?? 100)}`,
            payload: payloadOf({ index, pad: "x".repeat(200) })
          }
        })
        ids.push(...(yield* Outbox.withTransaction(Outbox.enqueue(drafts))))
      }
      return ids
    })
  )

export const query = <A extends object>(stack: Stack, text: string): Promise<ReadonlyArray<A>> =>
  stack.runPromise(Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql.unsafe<A>(text)))

export const tables = (stack: Stack) => stack.runPromise(Effect.service(PgTables.PgTables))

export const dropSchema = (stack: Stack, schema: string) => query(stack, `DROP SCHEMA IF EXISTS "${schema}" CASCADE`)

// ------------------------------------------------------------------------------------------------
// child processes
// ------------------------------------------------------------------------------------------------

export interface Child {
  readonly process: ChildProcess
  readonly lines: Array<string>
  readonly exited: Promise<number | null>
}

/** Runs `node <script>` with `env`; stdout lines are collected, stderr passed through when loud. */
export const spawnNode = (script: string, env: Record<string, string>): Child => {
  const child = spawn(process.execPath, [script], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  let buffer = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString()
    let nl = buffer.indexOf("\n")
    while (nl >= 0) {
      lines.push(buffer.slice(0, nl))
      buffer = buffer.slice(nl + 1)
      nl = buffer.indexOf("\n")
    }
  })
  child.stderr!.on("data", (chunk: Buffer) => {
    if (process.env.FAULTS_VERBOSE === "1") process.stderr.write(chunk)
  })
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  return { process: child, lines, exited }
}

export const run = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    execFile(
      command,
      [...args],
      { cwd: repoRoot, env: { ...process.env, ...env }, timeout: 300_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${command} ${args.join(" ")}: ${stderr || error.message}`))
        else resolve(stdout)
      }
    )
  })

// ------------------------------------------------------------------------------------------------
// the checker
// ------------------------------------------------------------------------------------------------

export interface TopicRecord {
  readonly eventId: string | undefined
  readonly key: string | null
  readonly partition: number
  readonly offset: number
  readonly value: Buffer | null
  readonly headers: Record<string, string>
}

/** Every record of `topic`, read from the beginning up to the high watermarks at call time. */
export const readTopic = async (brokers: ReadonlyArray<string>, topic: string): Promise<Array<TopicRecord>> => {
  const k = kafka(brokers)
  const admin = k.admin()
  await admin.connect()
  const offsets = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  const high = new Map(offsets.map((o) => [o.partition, Number(o.high)]))
  const total = offsets.reduce((s, o) => s + Number(o.high) - Number(o.low), 0)
  const out: Array<TopicRecord> = []
  if (total === 0) return out
  const consumer = k.consumer({ groupId: uniqueName("faults-checker"), maxWaitTimeInMs: 200 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`checker read ${out.length}/${total} records of ${topic}`)),
        120_000
      )
      void consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const m of batch.messages) {
              if (Number(m.offset) >= high.get(batch.partition)!) continue
              const headers: Record<string, string> = {}
              for (const [name, value] of Object.entries(m.headers ?? {}))
                if (value !== undefined) headers[name] = value.toString()
              out.push({
                eventId: headers["event-id"],
                key: m.key?.toString() ?? null,
                partition: batch.partition,
                offset: Number(m.offset),
                value: m.value,
                headers
              })
            }
            if (out.length >= total) {
              clearTimeout(timer)
              resolve()
            }
          }
        })
        .catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return out.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
}

export interface Verdict {
  readonly events: number
  readonly lost: number
  readonly duplicatesDelivered: number
  readonly duplicateEffects: number
  readonly orderViolations: number
  readonly lostIds: ReadonlyArray<string>
}

/**
 * Compares what was committed (ids in creation order, with keys) with what the topic holds:
 * lost = committed ids never seen; duplicates = copies beyond the first; order violations = keys
 * whose order of first appearance (per partition, by offset) differs from creation order.
 */
export const verdict = (
  committed: ReadonlyArray<{ readonly id: string; readonly key: string | null }>,
  records: ReadonlyArray<TopicRecord>,
  duplicateEffects = 0
): Verdict => {
  const seen = new Map<string, number>()
  const firstOrder = new Map<string, Array<string>>()
  for (const r of records) {
    if (r.eventId === undefined) continue
    const n = seen.get(r.eventId) ?? 0
    seen.set(r.eventId, n + 1)
    if (n === 0 && r.key !== null) firstOrder.set(r.key, [...(firstOrder.get(r.key) ?? []), r.eventId])
  }
  const lostIds = committed.filter((c) => !seen.has(c.id)).map((c) => c.id)
  let duplicates = 0
  for (const n of seen.values()) duplicates += n - 1
  const expected = new Map<string, Array<string>>()
  for (const c of committed) if (c.key !== null) expected.set(c.key, [...(expected.get(c.key) ?? []), c.id])
  let orderViolations = 0
  for (const [key, ids] of expected) {
    const got = (firstOrder.get(key) ?? []).filter((id) => ids.includes(id))
    const want = ids.filter((id) => seen.has(id))
    if (got.join() !== want.join()) orderViolations++
  }
  return {
    events: committed.length,
    lost: lostIds.length,
    duplicatesDelivered: duplicates,
    duplicateEffects,
    orderViolations,
    lostIds: lostIds.slice(0, 5)
  }
}

// ------------------------------------------------------------------------------------------------
// the table
// ------------------------------------------------------------------------------------------------

export interface TableRow extends Omit<Verdict, "lostIds"> {
  readonly scenario: string
  readonly note?: string
  /** Rows left in `FAILURE` at the end (blank when a scenario does not count them). */
  readonly failureRows?: number
  /** Records sent to the dead-letter topic (consumer scenarios); blank when not measured. */
  readonly deadLettered?: number
}

const rows: Array<TableRow> = []

export const record = (row: TableRow): void => {
  rows.push(row)
}

export const table = (): string => {
  const header = [
    "scenario",
    "events",
    "lost",
    "duplicates delivered",
    "duplicate effects",
    "order violations",
    "FAILURE rows",
    "dead-lettered",
    "note"
  ]
  const body = rows.map((r) =>
    [
      r.scenario,
      r.events,
      r.lost,
      r.duplicatesDelivered,
      r.duplicateEffects,
      r.orderViolations,
      r.failureRows ?? "",
      r.deadLettered ?? "",
      r.note ?? ""
    ].map(String)
  )
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`
  return [line(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map(line)].join("\n")
}

// ------------------------------------------------------------------------------------------------
// a private broker
// ------------------------------------------------------------------------------------------------

/**
 * A second Kafka broker on its own ports and state directory, started and stopped by the
 * project's `scripts/services`, so a test can take it down without touching the shared broker.
 */
export const privateBroker = (options: {
  readonly port: number
  readonly controllerPort: number
  readonly state: string
}) => {
  const env = {
    KAFKA_PORT: String(options.port),
    KAFKA_CONTROLLER_PORT: String(options.controllerPort),
    EFFECT_OUTBOX_STATE: options.state
  }
  const services = join(repoRoot, "scripts", "services")
  // The broker JVMs of this state directory (by their config path on the command line).
  const jvmPids = () => brokerJvmPids(options.state)
  // `scripts/services down` stops the JVM itself and waits until its port is closed; a JVM still
  // running afterwards would be a bug in the script, so it fails the test instead of being killed.
  const down = async () => {
    await run("bash", [services, "down"], env)
    const left = jvmPids()
    if (left.length > 0) throw new Error(`scripts/services down left broker JVMs running: ${left.join(", ")}`)
  }
  return {
    brokers: [`127.0.0.1:${options.port}`],
    state: options.state,
    up: () => run("bash", [services, "up"], env),
    down
  }
}

// ------------------------------------------------------------------------------------------------
// consumers
// ------------------------------------------------------------------------------------------------

/** The payload `enqueueMany` writes. */
export const EventPayload = Schema.Struct({ index: Schema.Number, pad: Schema.String })

/** The effects table: one row per handler run that committed (no unique key, so repeats show). */
export const createEffects = (stack: Stack, schema: string) =>
  query(
    stack,
    `CREATE TABLE IF NOT EXISTS "${schema}".effects (n bigserial PRIMARY KEY, event_id text NOT NULL, part int, record_offset bigint, at timestamptz NOT NULL DEFAULT clock_timestamp())`
  )

export const insertEffect = (
  schema: string,
  eventId: string,
  record?: { readonly partition: number; readonly offset: string }
) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql.unsafe(`INSERT INTO "${schema}".effects (event_id, part, record_offset) VALUES ($1, $2, $3)`, [
      eventId,
      record?.partition ?? null,
      record?.offset ?? null
    ])
  )

export const effectCounts = async (stack: Stack, schema: string): Promise<{ total: number; distinct: number }> => {
  const rows = await query<{ total: number; distinct: number }>(
    stack,
    `SELECT count(*)::int AS total, count(DISTINCT event_id)::int AS distinct FROM "${schema}".effects`
  )
  return rows[0]!
}

export interface RunningConsumer {
  readonly stop: () => Promise<void>
  /** Why the consumer stopped on its own, if it did. */
  readonly failure: () => string | undefined
}

/** Starts the library consumer in its own scope. */
export const startConsumer = async (
  stack: Stack,
  options: Omit<Consumer.Options<typeof EventPayload, unknown, SqlClient.SqlClient>, "schema">
): Promise<RunningConsumer> => {
  const scope = await stack.runPromise(Scope.make())
  const consumer = await stack.runPromise(
    Consumer.make({ ...options, schema: EventPayload }).pipe(Scope.provide(scope))
  )
  let stopping = false
  let failure: string | undefined
  // A consumer that fails stops consuming; surface that instead of waiting for a timeout.
  stack.runPromise(consumer.await).catch((error) => {
    if (!stopping) failure = inspect(error, { depth: 4 })
  })
  return {
    stop: () => {
      stopping = true
      return stack.runPromise(Scope.close(scope, Exit.void))
    },
    failure: () => failure
  }
}

/** Starts relay + stale recovery in their own scope; the returned function stops them. */
export const startRelay = async (
  stack: Stack,
  settings: Partial<Relay.Settings> = {},
  staleIntervalMillis = 500
): Promise<() => Promise<void>> => {
  const scope = await stack.runPromise(Scope.make())
  await stack.runPromise(
    Effect.gen(function* () {
      yield* StaleRecovery.start({ interval: Duration.millis(staleIntervalMillis), batchSize: 500 })
      yield* Relay.start({ batchSize: 100, pollInterval: Duration.millis(100), ...settings })
    }).pipe(Scope.provide(scope))
  )
  return () => stack.runPromise(Scope.close(scope, Exit.void))
}

// ------------------------------------------------------------------------------------------------
// publisher: a stack on the library's defaults
// ------------------------------------------------------------------------------------------------

/**
 * Like `stackLayer`, but every library setting at its default: `Outbox.layer` (the record limit
 * from `OUTBOX_MAX_RECORD_BYTES`, default 1,048,588) and the Kafka publisher's own timeouts.
 */
export const defaultsStackLayer = (options: {
  readonly schema: string
  readonly brokers?: ReadonlyArray<string>
  /** The Kafka client under the ports: kafkajs (the default adapter) or @platformatic/kafka. */
  readonly kafka?: "kafkajs" | "platformatic"
}) => {
  const client = PgClient.layer({
    url: Redacted.make(databaseUrl),
    maxConnections: 4,
    applicationName: "effect-outbox-faults"
  })
  const pg = PgOutbox.layer({ schema: options.schema }).pipe(Layer.provideMerge(client))
  const brokers = options.brokers ?? sharedBrokers
  const broker: Layer.Layer<Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader> =
    options.kafka === "platformatic"
      ? PlatformaticKafkaOutbox.layer({ brokers, clientId: "faults" })
      : KafkaOutbox.layer({ brokers, clientId: "faults" })
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.FAULTS_LOG_LEVEL ?? "Error") as LogLevel.LogLevel
  )
  return Layer.mergeAll(Outbox.layer, Inbox.Inbox.layer).pipe(
    Layer.provideMerge(Layer.merge(pg, broker)),
    Layer.provideMerge(logLevel)
  )
}

export const makeDefaultsStack = async (options: Parameters<typeof defaultsStackLayer>[0]): Promise<Stack> => {
  const runtime = ManagedRuntime.make(defaultsStackLayer(options))
  await runtime.runPromise(Effect.void)
  return runtime as unknown as Stack
}

// relay: freezing a private broker
// ------------------------------------------------------------------------------------------------

/** The pids of the broker JVM started with `state` (found by its config path). */
export const brokerJvmPids = (state: string): Array<number> =>
  readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        const cmdline = readFileSync(`/proc/${d}/cmdline`, "utf8")
        return cmdline.includes("kafka.Kafka") && cmdline.includes(join(state, "server.properties")) ? [Number(d)] : []
      } catch {
        return []
      }
    })

/** Freezes (`SIGSTOP`) or thaws (`SIGCONT`) the broker JVM of `state`; returns how many it signalled. */
export const signalBroker = (state: string, signal: "SIGSTOP" | "SIGCONT"): number => {
  const pids = brokerJvmPids(state)
  for (const pid of pids) process.kill(pid, signal)
  return pids.length
}

// private PostgreSQL (coldstart)
// ------------------------------------------------------------------------------------------------

/**
 * A PostgreSQL cluster of its own (initdb'd by `scripts/services pg-private`) on `port`, data under
 * `state`, so a test can stop PostgreSQL (`stop`: fast shutdown, data kept) and bring it back
 * (`start`) without touching the shared server. `down` stops it and deletes its data.
 */
export const privatePostgres = (
  options: { readonly port?: number | undefined; readonly state?: string | undefined } = {}
) => {
  // 25432 (FAULTS_PG_PORT) is scripts/services' default, below the ephemeral port range.
  const port = options.port ?? privatePort("FAULTS_PG_PORT", 25432)
  const state = options.state ?? mkdtempSync(join(tmpdir(), "effect-outbox-pg-"))
  const env = { PG_PRIVATE_PORT: String(port), EFFECT_OUTBOX_STATE: state }
  const services = join(repoRoot, "scripts", "services")
  const pg = (...command: ReadonlyArray<string>) => run("bash", [services, "pg-private", ...command], env)
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    state,
    up: () => {
      // initdb runs as the `postgres` user when we are root; it must reach the state directory
      // (mkdtemp makes it 0700).
      mkdirSync(state, { recursive: true })
      chmodSync(state, 0o755)
      return pg("up")
    },
    /** `fast` (the default) shuts down cleanly; `immediate` is a crash, recovered from the WAL on start. */
    stop: (mode: "fast" | "immediate" = "fast") => pg("stop", mode),
    start: () => pg("start"),
    down: () => pg("down").catch(() => ""),
    /** Commit durability (`on`: PostgreSQL's defaults; `off`: the test settings); the settings after. */
    durability: (setting?: "on" | "off") =>
      run("bash", [services, "pg-private", "durability", ...(setting === undefined ? [] : [setting])], env)
  }
}

// ------------------------------------------------------------------------------------------------
// logrelay: the log engine on a PostgreSQL with wal_level = logical
// ------------------------------------------------------------------------------------------------

/**
 * A PostgreSQL with `wal_level = logical`: `LOGICAL_DATABASE_URL` (scripts/test starts one with
 * `scripts/services pg-private` and exports it), else the private cluster's default port.
 */
export const logicalDatabaseUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"

/**
 * The log engine (PgLogOutbox on `slot`) + every Kafka port, at the fault tests' log level; the
 * Kafka ports on kafkajs (default) or on @platformatic/kafka (`kafka: "platformatic"`).
 */
export const logStackLayer = (options: {
  readonly slot: string
  /** Default `logicalDatabaseUrl`. */
  readonly url?: string
  /** Where the relay's replication connection goes, when not to `url` (e.g. through a proxy). */
  readonly replicationUrl?: string
  readonly brokers?: ReadonlyArray<string>
  readonly applicationName?: string
  readonly kafka?: "kafkajs" | "platformatic"
  /** Run the setup step (migrations, publication, slot) when the stack is built. Default true. */
  readonly setup?: boolean
}) => {
  const client = PgClient.layer({
    url: Redacted.make(options.url ?? logicalDatabaseUrl),
    maxConnections: 4,
    applicationName: options.applicationName ?? "effect-outbox-log"
  })
  // The event table in a schema named after the slot: each stack's publication sees its own events only.
  const pg = PgLogOutbox.layer({
    slot: options.slot,
    schema: options.slot,
    replicationUrl: options.replicationUrl,
    // The streaming buffer, when a test sizes it (the library's default otherwise).
    maxBufferedBytes:
      process.env.FAULTS_LOG_MAX_BUFFERED === undefined ? undefined : Number(process.env.FAULTS_LOG_MAX_BUFFERED),
    setup: options.setup
  }).pipe(Layer.provideMerge(client))
  const broker: Layer.Layer<Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader> =
    options.kafka === "platformatic"
      ? PlatformaticKafkaOutbox.layer({ brokers: options.brokers ?? sharedBrokers, clientId: "log-relay" })
      : KafkaOutbox.layer(
          {
            brokers: options.brokers ?? sharedBrokers,
            clientId: "log-relay",
            connectionTimeout: 3_000,
            requestTimeout: 10_000
          },
          { publisher: { publishTimeoutMillis: 8_000 } }
        )
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.FAULTS_LOG_LEVEL ?? "Error") as LogLevel.LogLevel
  )
  return Layer.mergeAll(pg, broker, logLevel)
}

export type LogStack = ManagedRuntime.ManagedRuntime<Layer.Success<ReturnType<typeof logStackLayer>>, unknown>

export const makeLogStack = async (options: Parameters<typeof logStackLayer>[0]): Promise<LogStack> => {
  const runtime = ManagedRuntime.make(logStackLayer(options))
  await runtime.runPromise(Effect.void)
  return runtime as LogStack
}

/** Enqueues `n` events through the log engine like `enqueueMany`; ids and keys in commit order. */
export const enqueueLog = (
  stack: LogStack,
  topic: string,
  n: number,
  options: { readonly keys?: number; readonly chunk?: number; readonly from?: number } = {}
): Promise<ReadonlyArray<{ readonly id: string; readonly key: string }>> =>
  stack.runPromise(
    Effect.gen(function* () {
      const out: Array<{ id: string; key: string }> = []
      const chunk = options.chunk ?? 50
      const from = options.from ?? 0
      for (let i = 0; i < n; i += chunk) {
        const drafts: Array<OutboxDraft> = Array.from({ length: Math.min(chunk, n - i) }, (_, j) => {
          const index = from + i + j
          return { topic, key: `k${index % (options.keys ?? 20)}`, payload: payloadOf({ index, pad: "x".repeat(200) }) }
        })
        const ids = yield* Outbox.withTransaction(Outbox.enqueue(drafts))
        for (const [j, id] of ids.entries()) out.push({ id, key: drafts[j]!.key! })
      }
      return out
    })
  )

/** Drops the slot (and its publication) and the stack's schema on the logical cluster; a left-over slot pins WAL. */
export const dropLogSlot = (stack: LogStack, slot: string): Promise<void> =>
  stack
    .runPromise(Effect.andThen(PgLogSource.dropSlot({ slot }), logQuery(`DROP SCHEMA IF EXISTS "${slot}" CASCADE`)))
    .then(
      () => undefined,
      () => undefined
    )

/** A query on the logical cluster. */
export const logQuery = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql.unsafe<A>(text, params as Array<any>))
