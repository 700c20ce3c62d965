/**
 * The log engine on PostgreSQL: the core `LogSource` (a logical replication slot) and
 * `LogWriter` (inserts into the event table).
 *
 * - Events are rows of the outbox schema's event table (`<prefix>log_event`: the id and the
 *   event's `LogRecord` bytes), inserted in the domain transaction; insert only, partitioned by
 *   time, retention drops whole partitions (`PgLogRetention`).
 * - The slot uses the built-in `pgoutput` plugin (binary) over a publication of that table
 *   alone, inserts only: only a role with INSERT on the table can put an event into the log.
 *   Logical messages are never decoded. Each insert is validated; one that is not an event this
 *   library wrote comes out flagged `invalid` (never a failed read), for the relay to set aside.
 * - Default transport (`"stream"`): one replication connection (`pg`) streams the slot with
 *   `START_REPLICATION`; transactions are buffered from the confirmed position (one larger
 *   than the buffer is given in parts), and `confirm` sends the status update that moves the slot. The lease is that connection: an
 *   advisory lock taken on it, and the slot, which one walsender at a time can stream.
 * - `transport: "sql"`: `pg_logical_slot_peek_binary_changes` per read (nothing consumed) and
 *   `pg_replication_slot_advance` per confirm on one reserved pool connection, which holds the
 *   same advisory lock.
 * - Nothing here creates the slot or the publication behind the operator's back: `ensureSlot`
 *   (or `PgLogOutbox.layer`'s setup) does, once; a relay that finds no slot fails with an error
 *   that says so.
 *
 * Needs `wal_level = logical` and a role with `REPLICATION` (or superuser). See docs/log-relay.md.
 *
 * @since 0.1.0
 */

import * as PgClient from "@effect/sql-pg/PgClient"
import type * as LogRecord from "@effect-outbox/core/LogRecord"
import { type LogGauges, type LogLease, LogSource, LogSourceError, type LogWindow } from "@effect-outbox/core/LogSource"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlConnection from "effect/sql/SqlConnection"
import { fromSqlError, sqlState } from "./internal/errors.ts"
import * as LeaseLock from "./internal/leaseLock.ts"
import * as LogGap from "./internal/logGap.ts"
import * as LogInsert from "./internal/logInsert.ts"
import * as LogProgress from "./internal/logProgress.ts"
import * as LogReader from "./internal/logReader.ts"
import * as LogSetup from "./internal/logSetup.ts"
import * as LogStream from "./internal/logStream.ts"
import * as LogTable from "./internal/logTable.ts"
import * as Pgoutput from "./internal/pgoutput.ts"
import * as PgTables from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The replication slot (one per outbox), also the publication's name. Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  /** The schema of the event table (as `PgTables`). Default `outbox`. */
  readonly schema?: string | undefined
  /** The prefix of the event table's name (as `PgTables`). Default `outbox_`. */
  readonly tablePrefix?: string | undefined
  /**
   * @deprecated Ignored. Events were logical messages under this prefix; they are rows of the
   * event table now, which only a role with INSERT on it can write.
   */
  readonly prefix?: string | undefined
  /**
   * Let the relay read the next window before the current one is confirmed (`LogLease.readAfter`).
   * `transport: "sql"`: through a temporary copy of the slot (`<slot>_ahead`, one more
   * replication slot while a relay holds the lease); default true; without a free slot the lease
   * reads one window at a time. Streaming: from the buffer; default false, since reads come from
   * memory and a window read ahead is only staler than one read after the confirm (it holds what
   * had arrived when the previous window's publish began).
   */
  readonly readAhead?: boolean | undefined
  /**
   * How the relay reads the slot. `"stream"` (the default): one replication connection streams
   * it (`START_REPLICATION`, through `pg`), buffered in memory from the confirmed position, and
   * wakes the relay on each commit. `"sql"`: `pg_logical_slot_peek_binary_changes` per read over
   * the pool. See docs/log-relay.md.
   */
  readonly transport?: "stream" | "sql" | undefined
  /**
   * Streaming: wire bytes of unconfirmed transactions (whole ones and the one being received)
   * held in memory before the socket is paused (resumed once confirms bring it under half). A
   * transaction larger than this is relayed in parts, never held whole. Default 32 MiB.
   */
  readonly maxBufferedBytes?: number | undefined
  /**
   * Streaming: where the replication connection goes. Default: the settings of the `PgClient`
   * in context (url, host, port, database, user, password, ssl, application name); without a
   * `PgClient` the layer fails unless this is given or `transport` is `"sql"`.
   */
  readonly replicationUrl?: Redacted.Redacted | string | undefined
}

const resolve = (options: Options) =>
  Effect.gen(function* () {
    const slot = yield* LogSetup.checkSlotName(options.slot ?? LogSetup.DEFAULT_SLOT)
    const tables = yield* PgTables.make({ schema: options.schema, tablePrefix: options.tablePrefix }).pipe(
      Effect.mapError(
        (error) => new LogSourceError({ operation: "log.options", reason: error.message, retriable: false })
      )
    )
    // The table's own name, as the server names the relation in pgoutput.
    return { slot, tables, table: `${tables.tablePrefix}log_event` }
  })

const logError = LogSetup.logError

type Exec = LogReader.Exec

/**
 * Parses pgoutput rows: the event table's inserts, up to the last commit, each stamped with its
 * transaction's commit position. Every call of the SQL interface starts a new decoding session,
 * which describes the relation again: a decoder per parse.
 */
const parseWindow = (rows: ReadonlyArray<LogReader.Row>, table: string): LogWindow => {
  const decoder = Pgoutput.makeDecoder(table)
  let upTo: string | null = null
  const entries: Array<LogRecord.LogMessage> = []
  let pending = 0
  let index = 0
  for (const row of rows) {
    const tag = row.data[0]
    if (tag === Pgoutput.TAG_COMMIT) {
      Pgoutput.stamp(entries, pending, row.lsn)
      pending = entries.length
      upTo = row.lsn
      index = 0
    } else {
      const at = row.lsn
      const entry = Pgoutput.change(decoder, row.data, () => at, index++)
      if (entry !== undefined) entries.push(entry)
    }
  }
  // Events after the last commit (none with upto_nchanges, which stops after a commit) are dropped.
  entries.length = pending
  return { entries, upTo }
}

const toWindow = (rows: ReadonlyArray<LogReader.Row>, table: string, maxEntries: number) =>
  Effect.succeed<LogWindow>({ ...parseWindow(rows, table), more: rows.length >= maxEntries })

const makeLease = (
  exec: Exec,
  slot: string,
  table: string,
  readAhead: boolean
): Effect.Effect<LogLease, never, Scope.Scope> =>
  Effect.gen(function* () {
    // One connection: the relay's read-ahead may overlap a confirm or a gauge sample.
    const permit = Semaphore.makeUnsafe(1)
    const run = <A, E, R>(effect: Effect.Effect<A, E, R>) => Semaphore.withPermit(permit, effect)
    const reader = LogReader.make(exec, slot)
    yield* Effect.addFinalizer(() => run(reader.drop).pipe(Effect.ignore))
    let ahead = readAhead
    const readAfter = (after: string, maxEntries: number) =>
      ahead
        ? run(reader.rowsAfter(after, maxEntries, slot)).pipe(
            Effect.map((rows): ReadonlyArray<LogReader.Row> | undefined => rows),
            Effect.catchIf(
              (error) => NO_READER.has(sqlState(error) ?? ""),
              (error) => {
                // No free replication slot for the copy: read from the slot, one window at a time.
                ahead = false
                const reason = fromSqlError("log.readAfter")(error).reason
                return Effect.as(Effect.logWarning(`log source: read-ahead off for slot ${slot}: ${reason}`), undefined)
              }
            ),
            Effect.mapError(logError("log.readAfter")),
            Effect.flatMap((rows) =>
              rows === undefined ? Effect.succeed(undefined) : toWindow(rows, table, maxEntries)
            ),
            Effect.withSpan("pg.log.readAfter", undefined, { captureStackTrace: false })
          )
        : Effect.succeed(undefined)
    return {
      read: (maxEntries) =>
        run(
          exec(
            `SELECT lsn::text AS lsn, data FROM pg_logical_slot_peek_binary_changes($1::name, NULL, $2::int4,
               'proto_version', '1', 'publication_names', $3::text, 'binary', 'true')`,
            [slot, maxEntries, slot]
          )
        ).pipe(
          Effect.mapError(logError("log.read")),
          Effect.flatMap((rows) => toWindow(rows, table, maxEntries)),
          Effect.withSpan("pg.log.read", undefined, { captureStackTrace: false })
        ),
      readAfter,
      confirm: (upTo) =>
        run(exec(`SELECT (pg_replication_slot_advance($1, $2::pg_lsn)).end_lsn::text AS lsn`, [slot, upTo])).pipe(
          Effect.mapError(logError("log.confirm")),
          Effect.asVoid,
          Effect.withSpan("pg.log.confirm", undefined, { captureStackTrace: false })
        ),
      gauges: run(gauges(exec, slot))
    } satisfies LogLease
  })

const gauges = (exec: Exec, slot: string): Effect.Effect<LogGauges, LogSourceError> =>
  exec(
    `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), confirmed_flush_lsn)::float8 AS lag,
            pg_wal_lsn_diff(pg_current_wal_insert_lsn(), restart_lsn)::float8 AS retained
       FROM pg_replication_slots WHERE slot_name = $1`,
    [slot]
  ).pipe(
    Effect.mapError(logError("log.gauges")),
    Effect.flatMap((rows) =>
      rows.length === 0
        ? Effect.fail(new LogSourceError({ operation: "log.gauges", reason: `slot ${slot} is gone`, retriable: false }))
        : Effect.succeed<LogGauges>({ lagBytes: Number(rows[0].lag), retainedBytes: Number(rows[0].retained) })
    )
  )

// 53400: max_replication_slots reached; 42710: the copy's name is taken (not ours to drop).
const NO_READER = new Set(["53400", "42710"])

/**
 * Whether some session holds the slot's lease now: a walsender streams the slot, or a session
 * (the SQL transport's) holds the lease lock of this database.
 */
const leaseHeld = (exec: Exec, slot: string): Effect.Effect<boolean, LogSourceError> =>
  exec(
    `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active)
         OR ${LeaseLock.heldBySomeone("$1")} AS held`,
    [slot]
  ).pipe(
    Effect.map((rows) => (rows[0] as { held?: unknown } | undefined)?.held === true),
    Effect.mapError(logError("log.acquire"))
  )

const poolExec =
  (sql: SqlClient.SqlClient): Exec =>
  (text, params) =>
    sql.unsafe(text, params as Array<any>)

/**
 * The explicit setup step: creates the publication (of the event table alone, inserts only,
 * through its root) and the slot when missing; fails when a publication of that name publishes
 * anything else. Needs a role that owns the event table (for the publication) and has
 * `REPLICATION` (for the slot): the operator's, not the writer's or the relay's. Events
 * committed before the slot exists are in the table but not in the slot: run it before the
 * first enqueue (`PgLogOutbox.layer` does, unless `setup: false`). Re-creating the slot of an
 * outbox whose relay has progress marks the gap there: the relay reads it back from the table.
 *
 * @since 0.1.0
 * @category setup
 */
export const ensureSlot = (options: Options = {}): Effect.Effect<void, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const { slot, tables } = yield* resolve(options)
    const sql = yield* SqlClient.SqlClient
    const created = yield* LogSetup.ensure(poolExec(sql), slot, tables)
    // A slot created for a relay that published before: its gap is for the relay to read back.
    if (created !== undefined) {
      yield* LogGap.mark(poolExec(sql), LogProgress.progressTable(tables), slot, created).pipe(
        Effect.mapError(logError("log.ensureSlot"))
      )
    }
  })

/**
 * Drops the slot and its publication (the server then frees the WAL it held). Tests and
 * decommissioning: the events stay in the event table until retention drops their partitions.
 *
 * @since 0.1.0
 * @category setup
 */
export const dropSlot = (options: Options = {}): Effect.Effect<void, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const { slot } = yield* resolve(options)
    const sql = yield* SqlClient.SqlClient
    yield* LogSetup.drop(poolExec(sql), slot)
  })

/**
 * Acquires that found no slot (dropped, invalidated by `max_slot_wal_keep_size`, or absent on a
 * new primary after a fail-over): nothing is published until an operator creates it. Alert on
 * any increase.
 *
 * @since 0.1.0
 * @category metrics
 */
export const slotMissing = LogSetup.slotMissingTotal

/** The slot (and publication) name used when none is given. @since 0.1.0 @category constants */
export const defaultSlot: string = LogSetup.DEFAULT_SLOT

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const { slot, table } = yield* resolve(options)
    const sql = yield* SqlClient.SqlClient
    const pool = poolExec(sql)
    const reported = LogSetup.reportMissing(slot)
    if (options.transport !== "sql") {
      const connection = yield* replicationConnection(options)
      return LogSource.of({
        acquire: reported(
          LogStream.acquire({
            slot,
            table,
            connection,
            maxBufferedBytes: options.maxBufferedBytes ?? 32 * 1024 * 1024,
            readAhead: options.readAhead === true,
            statusInterval: LogStream.defaultStatusInterval,
            silenceLimit: LogStream.defaultSilenceLimit,
            gauges: gauges(pool, slot),
            exists: LogSetup.slotExists(pool, slot),
            held: leaseHeld(pool, slot)
          })
        )
      })
    }
    const acquire = Effect.gen(function* () {
      const connection: SqlConnection.Connection = yield* sql.reserve
      const exec: Exec = (text, params) => connection.execute(text, params, undefined)
      const [row] = yield* exec(LeaseLock.tryLock("$1"), [slot])
      if (row?.ok !== true) return Option.none<LogLease>()
      yield* Effect.addFinalizer(() => exec(LeaseLock.unlock("$1"), [slot]).pipe(Effect.ignore))
      if (!(yield* LogSetup.slotExists(exec, slot))) return yield* LogSetup.slotMissing(slot)
      return Option.some(yield* makeLease(exec, slot, table, options.readAhead !== false))
    }).pipe(Effect.mapError((error) => (error instanceof LogSourceError ? error : logError("log.acquire")(error))))
    return LogSource.of({ acquire: reported(acquire) })
  })

const definedOnly = (record: Record<string, unknown>): Readonly<Record<string, unknown>> =>
  Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined))

/**
 * The replication connection's settings: `replicationUrl`, or those of the `PgClient` in context.
 * The password (static or an effect) is read at each connect.
 */
const replicationConnection = (options: Options) =>
  Effect.gen(function* () {
    if (options.replicationUrl !== undefined) {
      const url = options.replicationUrl
      return Effect.succeed<Readonly<Record<string, unknown>>>({
        connectionString: typeof url === "string" ? url : Redacted.value(url)
      })
    }
    const client = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(client)) {
      return yield* Effect.fail(
        new LogSourceError({
          operation: "log.options",
          reason: `the streaming transport connects like the PgClient in context, and there is none: provide one, set replicationUrl, or transport: "sql"`,
          retriable: false
        })
      )
    }
    const c = client.value.config
    return Effect.gen(function* () {
      const password =
        c.password === undefined
          ? undefined
          : Redacted.value(Redacted.isRedacted(c.password) ? c.password : yield* c.password)
      return definedOnly({
        connectionString: c.url === undefined ? undefined : Redacted.value(c.url),
        host: c.host,
        port: c.port,
        database: c.database,
        user: c.username,
        password,
        ssl: c.ssl,
        stream: c.stream,
        application_name: c.applicationName
      })
    })
  })

/**
 * The log source of one slot.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<LogSource, LogSourceError, SqlClient.SqlClient> =>
  Layer.effect(LogSource)(make(options))

/**
 * The writer: one INSERT into the event table per enqueue, in the ambient transaction. Needs
 * only INSERT on that table; it creates nothing (`ensureSlot` is the setup step).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWriter = (options: Options = {}): Layer.Layer<LogWriter, LogSourceError, SqlClient.SqlClient> =>
  Layer.effect(LogWriter)(
    Effect.gen(function* () {
      const { tables } = yield* resolve(options)
      const sql = yield* SqlClient.SqlClient
      return LogWriter.of({ emit: LogInsert.inserter(sql, tables) })
    })
  )

/**
 * Which events of the event table to read: enqueued at or after `from` and before `to` (epoch
 * millis, the enqueue's clock as the id carries it), in id order, after the id `after` (the
 * last one of the previous page), at most `limit` (default 1,000).
 *
 * @since 0.1.0
 * @category models
 */
export interface TableRange extends Options {
  readonly from: number
  readonly to: number
  readonly after?: string | undefined
  readonly limit?: number | undefined
}

/**
 * Reads events back from the event table, the backstop of the slot: what a lost or re-created
 * slot did not deliver is still there until retention drops its partition (never while there is
 * no slot). Each row is validated as the relay validates it (`invalid` set when it fails). Order
 * is id order, which is enqueue order per writer, not commit order across writers. Needs SELECT on
 * the event table.
 *
 * @since 0.1.0
 * @category backstop
 */
export const readTable = (
  range: TableRange
): Effect.Effect<ReadonlyArray<LogRecord.LogMessage>, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const { tables } = yield* resolve(range)
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql
      .unsafe<{ id: string; record: Uint8Array }>(
        `SELECT id::text AS id, record FROM ${tables.logEvent}
          WHERE id >= $1::uuid AND id < $2::uuid AND ($3::uuid IS NULL OR id > $3::uuid)
          ORDER BY id LIMIT $4::int4`,
        [
          LogTable.idFloor(Math.floor(range.from)),
          LogTable.idFloor(Math.ceil(range.to)),
          range.after ?? null,
          range.limit ?? 1_000
        ]
      )
      .withoutTransform.pipe(Effect.mapError(logError("log.readTable")))
    return rows.map((row) => Pgoutput.event(row.id as EventId, row.record))
  })
