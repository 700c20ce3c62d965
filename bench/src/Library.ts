/**
 * The library side of every scenario, in one place: an outbox stack on PostgreSQL + Kafka (or a
 * no-Kafka sink), relays started with explicit settings, enqueueing, and `Inbox.processOnce`.
 * Orchestration elsewhere is plain async code; each stack owns a ManagedRuntime.
 */

import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaPublisher from "@effect-outbox/adapter-kafka/KafkaPublisher"
import * as PlatformaticClient from "@effect-outbox/adapter-kafka-platformatic/PlatformaticClient"
import * as PlatformaticPublisher from "@effect-outbox/adapter-kafka-platformatic/PlatformaticPublisher"
import * as PgInboxStore from "@effect-outbox/adapter-pg/PgInboxStore"
import * as PgMigrations from "@effect-outbox/adapter-pg/PgMigrations"
import * as PgOutboxStore from "@effect-outbox/adapter-pg/PgOutboxStore"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import * as PgWakeUp from "@effect-outbox/adapter-pg/PgWakeUp"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import * as Retention from "@effect-outbox/core/Retention"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as WakeUp from "@effect-outbox/core/WakeUp"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as References from "effect/References"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import * as Env from "./Env.ts"

export type Sink = "kafka" | "none"
export type Wake = "listen" | "poll"
/** Which Kafka adapter publishes: kafkajs (`KafkaPublisher`, the default) or @platformatic/kafka. */
export type KafkaAdapter = "kafkajs" | "platformatic"

export interface StackOptions {
  readonly schema: string
  readonly pgConnections?: number
  readonly sink?: Sink
  /** The default wake-up (in process + a coalesced NOTIFY after commit, LISTEN), or polling only. */
  readonly wake?: Wake
  /** Default: `BENCH_KAFKA` (`pnpm bench --kafka platformatic` sets it), else kafkajs. */
  readonly kafka?: KafkaAdapter
}

/** Claim + mark without a broker: every record gets a receipt at once. */
const nullPublisher = Layer.sync(Publisher)(() => {
  let offset = 0
  return Publisher.of({
    publish: (requests) =>
      Effect.sync(() => requests.map((r) => Result.succeed({ topic: r.topic, partition: 0, offset: String(offset++) })))
  })
})

const services = (options: StackOptions) => {
  const sql = Env.pgLayer(options.pgConnections ?? 4)
  const tables = PgTables.layer({ schema: options.schema })
  const wake = options.wake ?? "listen"
  const base = Layer.mergeAll(
    PgOutboxStore.layer(),
    PgTransactor.layer,
    PgInboxStore.layer,
    wake === "listen" ? PgWakeUp.layer() : WakeUp.layerPollingOnly
  ).pipe(Layer.provideMerge(PgMigrations.layer), Layer.provideMerge(tables), Layer.provideMerge(sql))
  const publisher =
    (options.sink ?? "kafka") === "none"
      ? nullPublisher
      : (options.kafka ?? process.env.BENCH_KAFKA) === "platformatic"
        ? PlatformaticPublisher.layer().pipe(
            Layer.provide(PlatformaticClient.layer({ brokers: Env.brokers, clientId: "bench-relay" }))
          )
        : KafkaPublisher.layer().pipe(
            Layer.provide(KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-relay" }))
          )
  const outbox = Outbox.layerWith({ maxPayloadBytes: 1_000_000 })
  // The library logs every transition at INFO; a production deployment at volume runs at WARN
  // (BENCH_LOG_LEVEL=Info measures the default; bench/JOURNAL.md gives both).
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.BENCH_LOG_LEVEL ?? "Warn") as LogLevel.LogLevel
  )
  return Layer.mergeAll(outbox, Inbox.Inbox.layer).pipe(
    Layer.provideMerge(Layer.merge(base, publisher)),
    Layer.provideMerge(logLevel)
  )
}

export type Services = Layer.Success<ReturnType<typeof services>>

export interface Stack {
  readonly schema: string
  readonly run: <A, E>(effect: Effect.Effect<A, E, Services>) => Promise<A>
  readonly dispose: () => Promise<void>
}

export const makeStack = async (options: StackOptions): Promise<Stack> => {
  const runtime = ManagedRuntime.make(services(options))
  await runtime.runPromise(Effect.void)
  return {
    schema: options.schema,
    run: (effect) => runtime.runPromise(effect),
    dispose: () => runtime.dispose()
  }
}

export const draft = (topic: string, i: number): OutboxDraft => ({
  topic,
  key: Env.keyOf(i),
  payload: Env.payload(i)
})

/** Fills the outbox with `n` PENDING rows in transactions of `chunk`. */
export const fillBacklog = (stack: Stack, topic: string, n: number, chunk = 1000): Promise<void> =>
  stack.run(
    Effect.gen(function* () {
      for (let i = 0; i < n; i += chunk) {
        const drafts = Array.from({ length: Math.min(chunk, n - i) }, (_, j) => draft(topic, i + j))
        yield* Outbox.withTransaction(Outbox.enqueue(drafts))
      }
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      yield* sql.unsafe(`VACUUM ANALYZE ${t.message}`).unprepared
    })
  )

/** Rows not yet finished with publication (PENDING or DISPATCHING). */
export const unpublished = (stack: Stack): Promise<number> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${t.message} WHERE status IN ('PENDING','DISPATCHING')`
      )
      return rows[0]!.n
    })
  )

/**
 * Whether nothing is left to publish (no PENDING or DISPATCHING row), for drain loops that poll
 * while a relay runs: two `EXISTS` probes through the relay's own partial indexes stop at the
 * first live entry, where `unpublished`'s `count(*)` reads every row of the table on each poll
 * (a sequential scan of the whole backlog every 50 ms, PostgreSQL CPU taken from the relay).
 */
export const drained = (stack: Stack): Promise<boolean> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ left: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM ${t.message} WHERE status = 'PENDING')
             OR EXISTS (SELECT 1 FROM ${t.message} WHERE status = 'DISPATCHING') AS left`
      )
      return !rows[0]!.left
    })
  )

export const statusCounts = (stack: Stack): Promise<Record<string, number>> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM ${t.message} GROUP BY status`
      )
      return Object.fromEntries(rows.map((r) => [r.status, r.n]))
    })
  )

export const truncate = (stack: Stack): Promise<void> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      yield* sql.unsafe(`TRUNCATE ${t.message}, ${t.processed} CASCADE`).unprepared
    })
  )

export const tableSizes = (stack: Stack): Promise<{ table: number; indexes: number; toast: number; rows: number }> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ table: string; indexes: string; total: string; rows: number }>(
        `SELECT pg_relation_size('${t.message}')::text AS table,
              pg_indexes_size('${t.message}')::text AS indexes,
              pg_total_relation_size('${t.message}')::text AS total,
              (SELECT count(*)::int FROM ${t.message}) AS rows`
      )
      const r = rows[0]!
      return {
        table: Number(r.table),
        indexes: Number(r.indexes),
        toast: Number(r.total) - Number(r.table) - Number(r.indexes),
        rows: r.rows
      }
    })
  )

export interface RelaySettings {
  readonly batchSize: number
  readonly pollMillis: number
  /** Batches in flight; the relay's default (2) when absent. */
  readonly pipelineDepth?: number
}

/** Where a relay's batches spend their time: sums in ms over `batches` batches. */
export interface BatchProfile {
  batches: number
  claim: number
  publish: number
  mark: number
  /** `performance.now()` when the last batch's mark returned (0: none yet). */
  lastMarkAt: number
  /** Rows of the batches whose mark returned. */
  rows: number
}

export const emptyProfile = (): BatchProfile => ({ batches: 0, claim: 0, publish: 0, mark: 0, lastMarkAt: 0, rows: 0 })

/**
 * Relay hooks that time each batch: claim = previous mark (or start) → after claim; publish =
 * after claim → after publish; mark = after publish → after mark. Meaningful while draining a
 * backlog (no idle time between batches).
 */
const profilingHooks = (profile: BatchProfile): Relay.HooksShape => {
  let last = performance.now()
  return {
    at: (point, _owner, rows) =>
      Effect.sync(() => {
        const now = performance.now()
        if (point === "afterClaim") profile.claim += now - last
        else if (point === "afterPublish") profile.publish += now - last
        else {
          profile.mark += now - last
          profile.batches++
          profile.rows += rows.length
          profile.lastMarkAt = now
        }
        last = now
      })
  }
}

/** Starts a relay in its own scope on `stack`; the returned function stops it gracefully. */
export const startRelay = async (
  stack: Stack,
  settings: RelaySettings,
  profile?: BatchProfile
): Promise<() => Promise<void>> => {
  const scope = await stack.run(Scope.make())
  await stack.run(
    Relay.start({
      batchSize: settings.batchSize,
      maxPerKey: settings.batchSize,
      pollInterval: Duration.millis(settings.pollMillis),
      lease: Duration.seconds(60),
      publishTimeout: Duration.seconds(30),
      shutdownTimeout: Duration.seconds(30),
      ...(settings.pipelineDepth === undefined ? {} : { pipelineDepth: settings.pipelineDepth })
    }).pipe(
      profile === undefined ? (e) => e : Effect.provideService(Relay.Hooks, profilingHooks(profile)),
      Scope.provide(scope)
    )
  )
  return () => stack.run(Scope.close(scope, Exit.void))
}

/** One business transaction: the order row, and (when `outbox`) its event, committed together. */
export const businessWriteTx = (table: string, topic: string, i: number, outbox: boolean) =>
  Outbox.withTransaction(
    Effect.gen(function* () {
      yield* insertOrder(table, Env.newEventId(), i)
      if (outbox) yield* Outbox.enqueue(draft(topic, i))
    })
  )

export const businessWrite = (stack: Stack, table: string, topic: string, i: number, outbox: boolean): Promise<void> =>
  stack.run(businessWriteTx(table, topic, i, outbox))

/**
 * The same business transaction with the outbox row written by hand: the order row and one plain
 * `INSERT` of the event (same columns, same 1 KB payload, the event-id header) through the same
 * `SqlClient`, in `sql.withTransaction`. The write path's baseline for the library's own overhead.
 * Its id is a UUIDv7 like the library's (a random UUIDv4's scattered
 * primary-key inserts would charge the baseline a cost the library's time-ordered ids do not pay). The library's row also carries a
 * `traceparent` header (about 70 bytes more jsonb); the hand row does not.
 */
export const handWriteTx = (table: string, topic: string, i: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables.PgTables
    const id = Env.newEventIdV7()
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* insertOrder(table, Env.newEventId(), i)
        yield* sql`INSERT INTO ${sql.literal(t.message)}
          (id, topic, key, partition, headers, payload, status, available_at, created_at, updated_at)
          VALUES (${id}::uuid, ${topic}, ${Env.keyOf(i)}, NULL, ${JSON.stringify({ "event-id": id })}::jsonb,
                  ${Env.payload(i)}, 'PENDING', now(), now(), now())`
      })
    )
  })

export const handWrite = (stack: Stack, table: string, topic: string, i: number): Promise<void> =>
  stack.run(handWriteTx(table, topic, i))

/**
 * The order row and `OutboxStore.insert` of the event in `sql.withTransaction`: the store's insert
 * statement alone, without `Outbox.enqueue` and the Transactor (the what-ifs' `store` mode).
 */
export const storeWriteTx = (table: string, topic: string, i: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const now = Date.now()
    const id = Env.newEventId()
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* insertOrder(table, Env.newEventId(), i)
        yield* store.insert([
          {
            id: id as never,
            topic,
            key: Env.keyOf(i),
            partition: null,
            headers: { "event-id": id },
            payload: Env.payload(i),
            status: "PENDING",
            availableAt: now,
            createdAt: now
          }
        ])
      })
    )
  })

/** Commits `count` events in one transaction and returns their ids with the commit time. */
export const enqueueCommitted = (
  stack: Stack,
  topic: string,
  from: number,
  count: number
): Promise<{ ids: ReadonlyArray<string>; committedAt: number }> =>
  stack.run(
    Effect.gen(function* () {
      const drafts = Array.from({ length: count }, (_, j) => draft(topic, from + j))
      const ids = yield* Outbox.withTransaction(Outbox.enqueue(drafts))
      return { ids, committedAt: Date.now() }
    })
  )

export { Effect, Inbox, OutboxStore, SqlClient, Transactor }

export const dropSchema = (stack: Stack): Promise<void> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${stack.schema}" CASCADE`).unprepared
    })
  )

/** The table `insertOrder` writes to (`qualified`: a schema-qualified name), created if missing. */
export const createOrdersTable = (qualified: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql
      .unsafe(`CREATE TABLE IF NOT EXISTS ${qualified} (
        id uuid PRIMARY KEY, user_id text NOT NULL, amount int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
      .unprepared.pipe(Effect.asVoid)
  )

/** The business row of every write-path transaction (and the one a consumed event causes), by id. */
export const insertOrder = (table: string, eventId: string, i: number) =>
  Effect.flatMap(
    Effect.service(SqlClient.SqlClient),
    (sql) => sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${eventId}, ${Env.keyOf(i)}, ${i % 997})`
  )

export interface Consumed {
  readonly eventId: string
  readonly i: number
  readonly topic: string
  readonly partition: number
  readonly offset: string
}

/** One transaction per message (or per batch): the business write alone, or inside `processOnce`. */
export const handleConsumed = (
  stack: Stack,
  table: string,
  messages: ReadonlyArray<Consumed>,
  mode: { readonly dedupe: boolean; readonly perBatch: boolean }
): Promise<unknown> => {
  const one = (m: Consumed): Effect.Effect<void, unknown, Services> =>
    mode.dedupe
      ? Effect.asVoid(
          Inbox.processOnce(
            { consumer: "bench", identity: Inbox.eventIdentity(m.eventId) },
            insertOrder(table, m.eventId, m.i)
          )
        )
      : Effect.asVoid(insertOrder(table, m.eventId, m.i))
  return stack.run(
    Effect.gen(function* () {
      const transactor = yield* Transactor
      if (mode.perBatch) {
        yield* transactor.withTransaction(Effect.forEach(messages, one, { discard: true }))
      } else {
        // processOnce opens its own transaction; the baseline gets one of its own too.
        yield* Effect.forEach(messages, (m) => (mode.dedupe ? one(m) : transactor.withTransaction(one(m))), {
          discard: true
        })
      }
    })
  )
}

/** Retention on `stack` in its own scope: PUBLISHED rows older than `olderThanMs` go. */
export const startRetention = async (
  stack: Stack,
  olderThanMs: number,
  intervalMs: number
): Promise<() => Promise<void>> => {
  const scope = await stack.run(Scope.make())
  await stack.run(
    Retention.start({
      olderThan: Duration.millis(olderThanMs),
      interval: Duration.millis(intervalMs),
      batchSize: 1000,
      maxBatchesPerRound: 100
    }).pipe(Scope.provide(scope))
  )
  return () => stack.run(Scope.close(scope, Exit.void))
}

/** Whether the server runs autovacuum (`SHOW autovacuum`). */
export const autovacuumOn = (stack: Stack): Promise<boolean> =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ autovacuum: string }>`SHOW autovacuum`
      return rows[0]?.autovacuum === "on"
    })
  )

/**
 * Vacuums the outbox table every `everyMs` until the returned function is called: autovacuum's
 * stand-in on a server that runs without it. A VACUUM that cannot remove rows (the xmin horizon
 * held back) still runs, as autovacuum would.
 */
export const startVacuumLoop = async (stack: Stack, everyMs: number): Promise<() => Promise<void>> => {
  const scope = await stack.run(Scope.make())
  const vacuum = Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables.PgTables
    yield* sql.unsafe(`VACUUM ${t.message}`).unprepared
  })
  await stack.run(Effect.forkIn(Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(everyMs)), vacuum)), scope))
  return () => stack.run(Scope.close(scope, Exit.void))
}

/**
 * Opens a transaction that takes a transaction id and sits idle, holding back the xmin horizon
 * (VACUUM cannot remove anything deleted after it) until the returned function is called.
 */
export const holdBackVacuum = async (stack: Stack): Promise<() => Promise<void>> => {
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let started: () => void = () => undefined
  const holding = new Promise<void>((resolve) => {
    started = resolve
  })
  const done = stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT txid_current()`
          started()
          yield* Effect.promise(() => released)
        })
      )
    })
  )
  await holding
  return async () => {
    release()
    await done
  }
}
