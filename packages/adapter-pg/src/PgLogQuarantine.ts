/**
 * The log relay's quarantine on PostgreSQL (`LogLease.quarantine`, core `LogQuarantine`): a table
 * in the outbox schema (`<schema>.<prefix>log_quarantine`, migration 10) holding each event the
 * broker refused for good or the log flagged invalid, with the record's bytes and the reason, and
 * the later events of its topic and key held behind it. The operator's verbs (`list`, `retry`,
 * `skip`, which never change the schema) and the relay's outcomes all change statuses through one
 * transition function.
 *
 * `PgLogOutbox.layer` includes it.
 *
 * @since 0.1.0
 */
import type { BlockedKey, LogQuarantine, QuarantineEntry, QuarantineStatus } from "@effect-outbox/core/LogQuarantine"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import type { EventId, Headers } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as Q from "./internal/logQuarantine.ts"
import { DEFAULT_SLOT } from "./internal/logSetup.ts"
import * as PgTables from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The slot whose quarantine this is (the log source's). Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  /** Default `outbox`. */
  readonly schema?: string | undefined
  /** Default `outbox_`. */
  readonly tablePrefix?: string | undefined
}

/**
 * One quarantined event, as `list` shows it.
 *
 * @since 0.1.0
 * @category models
 */
export interface QuarantinedEvent {
  readonly seq: number
  readonly eventId: string
  readonly position: string
  readonly topic: string
  readonly key: string | null
  readonly invalid: boolean
  readonly reason: string
  readonly status: QuarantineStatus
  readonly quarantinedAt: Date
  readonly resolvedBy: string | null
  readonly resolvedAt: Date | null
}

const bytes = (payload: Uint8Array) => Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)

const put = (sql: SqlClient.SqlClient, table: string, slot: string) => (entries: ReadonlyArray<QuarantineEntry>) =>
  sql
    .withTransaction(
      Effect.forEach(
        entries,
        ({ message: m, position, reason, status }) =>
          sql.unsafe(
            `INSERT INTO ${table} (slot, event_id, position, topic, key, partition, headers, payload, created_at, invalid, reason, status)
             VALUES ($1, $2, $3::pg_lsn, $4, $5, $6, $7::jsonb, $8, to_timestamp($9::float8 / 1000), $10, $11, $12)
             ON CONFLICT (slot, event_id) DO NOTHING`,
            [
              slot,
              String(m.id),
              position,
              String(m.topic),
              typeof m.key === "string" ? m.key : null,
              Number.isInteger(m.partition) ? m.partition : null,
              JSON.stringify(m.headers ?? {}),
              bytes(m.payload),
              Number.isFinite(m.createdAt) ? m.createdAt : Date.now(),
              m.invalid !== undefined,
              reason,
              status
            ] as Array<unknown>
          ),
        { discard: true }
      )
    )
    .pipe(Effect.mapError(Q.sqlFailed("log.quarantine.put")))

interface ReleasedRow {
  readonly id: string
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: string
  readonly payload: Uint8Array
  readonly created: number
}

// The RETRYING and HELD events of keys with a RETRYING one and none QUARANTINED, in log order.
const releasedSql = (table: string) =>
  `SELECT event_id AS id, topic, key, partition, headers::text AS headers, payload,
          (extract(epoch FROM created_at) * 1000)::float8 AS created
     FROM ${table} q
    WHERE slot = $1 AND status IN ('RETRYING', 'HELD') AND NOT invalid
      AND EXISTS (SELECT 1 FROM ${table} r WHERE r.slot = q.slot AND r.status = 'RETRYING' AND r.topic = q.topic
                    AND (r.key = q.key OR r.event_id = q.event_id))
      AND NOT EXISTS (SELECT 1 FROM ${table} r WHERE r.slot = q.slot AND r.status = 'QUARANTINED'
                        AND r.topic = q.topic AND r.key = q.key)
    ORDER BY seq`

const toMessage = (row: ReleasedRow): LogMessage => ({
  id: row.id as EventId,
  topic: row.topic,
  key: row.key,
  partition: row.partition,
  headers: JSON.parse(row.headers) as Headers,
  payload: row.payload,
  createdAt: Number(row.created)
})

/** Groups rows by topic and key (a null key alone), keeping log order inside each. */
const byKey = (rows: ReadonlyArray<ReleasedRow>): ReadonlyArray<ReadonlyArray<LogMessage>> => {
  const groups = new Map<string, Array<LogMessage>>()
  for (const row of rows) {
    const k = row.key === null ? `id\u0000${row.id}` : `key\u0000${row.topic}\u0000${row.key}`
    const group = groups.get(k)
    if (group === undefined) groups.set(k, [toMessage(row)])
    else group.push(toMessage(row))
  }
  return [...groups.values()]
}

/** The slot's table and transition function; the tables must exist. */
const open = (options: Options) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const slot = options.slot ?? DEFAULT_SLOT
    const tables = yield* PgTables.make(options).pipe(
      Effect.mapError(
        (e) => new LogSourceError({ operation: "log.quarantine.options", reason: e.message, retriable: false })
      )
    )
    const table = Q.quarantineTable(tables)
    const move = (request: Omit<Q.TransitionRequest, "slot">) => Q.transition(sql, table, { ...request, slot })
    return { sql, slot, tables, table, move }
  })

/**
 * The quarantine of one slot, over the pool: the relay's store. Its table comes with the outbox
 * migrations (`PgLogOutbox.setup` runs them).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const { move, slot, sql, table } = yield* open(options)
    const store: LogQuarantine = {
      blocked: sql
        .unsafe<BlockedKey>(
          `SELECT DISTINCT topic, key FROM ${table} WHERE slot = $1 AND key IS NOT NULL AND status IN (${Q.unresolvedList})`,
          [slot]
        )
        .pipe(Effect.mapError(Q.sqlFailed("log.quarantine.blocked"))),
      put: put(sql, table, slot),
      released: sql
        .unsafe<ReleasedRow>(releasedSql(table), [slot])
        .pipe(Effect.map(byKey), Effect.mapError(Q.sqlFailed("log.quarantine.released"))),
      settle: ({ behind, published, refused }) =>
        Effect.gen(function* () {
          const released = ["RETRYING", "HELD"] as const
          yield* move({ target: { _tag: "ids", ids: published }, from: released, to: "RETRIED" })
          if (refused === undefined) return
          yield* move({
            target: { _tag: "ids", ids: [refused.id] },
            from: released,
            to: "QUARANTINED",
            reason: refused.reason
          })
          yield* move({ target: { _tag: "ids", ids: behind }, from: ["RETRYING"], to: "HELD" })
        })
    }
    return { store }
  })

/**
 * Gives every lease of the `LogSource` in context this slot's quarantine.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<LogSource, LogSourceError, LogSource | SqlClient.SqlClient> =>
  Layer.effect(LogSource)(
    Effect.gen(function* () {
      const source = yield* LogSource
      const { store } = yield* make(options)
      return LogSource.of({
        ...source,
        acquire: Effect.map(
          source.acquire,
          Option.map((lease) => ({ ...lease, quarantine: store }))
        )
      })
    })
  )

const refuse = (operation: string, reason: string) => new LogSourceError({ operation, reason, retriable: false })

interface Row {
  readonly seq: string
  readonly event_id: string
  readonly position: string
  readonly topic: string
  readonly key: string | null
  readonly invalid: boolean
  readonly reason: string
  readonly status: QuarantineStatus
  readonly quarantined_at: Date
  readonly resolved_by: string | null
  readonly resolved_at: Date | null
}

const columns = `seq::text, event_id, position::text, topic, key, invalid, reason, status, quarantined_at, resolved_by, resolved_at`

const toEvent = (r: Row): QuarantinedEvent => ({
  seq: Number(r.seq),
  eventId: r.event_id,
  position: r.position,
  topic: r.topic,
  key: r.key,
  invalid: r.invalid,
  reason: r.reason,
  status: r.status,
  quarantinedAt: r.quarantined_at,
  resolvedBy: r.resolved_by,
  resolvedAt: r.resolved_at
})

/**
 * The slot's quarantined events in log order; `status` keeps only those (default: every status).
 *
 * @since 0.1.0
 * @category operations
 */
export const list = (
  options: Options & {
    readonly status?: ReadonlyArray<QuarantineStatus> | undefined
    readonly limit?: number | undefined
  } = {}
): Effect.Effect<ReadonlyArray<QuarantinedEvent>, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const { slot, sql, table } = yield* open(options)
    const rows = yield* sql
      .unsafe<Row>(
        `SELECT ${columns} FROM ${table} WHERE slot = $1 AND ($2::text[] IS NULL OR status = ANY($2::text[]))
          ORDER BY seq LIMIT $3`,
        [slot, options.status ?? null, options.limit ?? 1000] as Array<unknown>
      )
      .withoutTransform.pipe(Effect.mapError(Q.sqlFailed("log.quarantine.list")))
    return rows.map(toEvent)
  })

/**
 * What an operator's `retry` or `skip` moves (or, with `execute` false, would move).
 *
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  readonly events: ReadonlyArray<QuarantinedEvent>
  readonly to: QuarantineStatus
  readonly executed: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Request extends Options {
  readonly eventId: string
  /** Who asks (recorded as `resolved_by`). */
  readonly by: string
  /** `false` (a dry run) shows what would move and moves nothing. */
  readonly execute: boolean
}

const openOfKey = (sql: SqlClient.SqlClient, table: string, slot: string, head: Row) =>
  head.key === null
    ? Effect.succeed([head])
    : sql
        .unsafe<Row>(
          `SELECT ${columns} FROM ${table} WHERE slot = $1 AND topic = $2 AND key = $3
             AND status IN ('QUARANTINED', 'HELD') ORDER BY seq`,
          [slot, head.topic, head.key]
        )
        .withoutTransform.pipe(Effect.mapError(Q.sqlFailed("log.quarantine.retry")))

const find = (sql: SqlClient.SqlClient, table: string, slot: string, eventId: string, operation: string) =>
  sql
    .unsafe<Row>(`SELECT ${columns} FROM ${table} WHERE slot = $1 AND event_id = $2`, [slot, eventId])
    .withoutTransform.pipe(
      Effect.mapError(Q.sqlFailed(operation)),
      Effect.flatMap((rows) =>
        rows[0] === undefined
          ? Effect.fail(refuse(operation, `no event ${eventId} in the quarantine of slot ${slot}`))
          : Effect.succeed(rows[0])
      )
    )

/**
 * Publishes a quarantined event again, with the events of its topic and key held behind it, in
 * log order (the relay does, within `quarantineInterval`): after the cause is fixed, e.g. the
 * topic created. An invalid event cannot be retried: skip it.
 *
 * @since 0.1.0
 * @category operations
 */
export const retry = (request: Request): Effect.Effect<Plan, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const op = "log.quarantine.retry"
    const { move, slot, sql, table } = yield* open(request)
    const head = yield* find(sql, table, slot, request.eventId, op)
    if (head.status !== "QUARANTINED") {
      return yield* Effect.fail(
        refuse(op, `event ${head.event_id} is ${head.status}; only a QUARANTINED event is retried`)
      )
    }
    const events = yield* openOfKey(sql, table, slot, head)
    const invalid = events.find((e) => e.invalid && e.status === "QUARANTINED")
    if (invalid !== undefined) {
      return yield* Effect.fail(
        refuse(op, `event ${invalid.event_id} is invalid (${invalid.reason}) and is never published: skip it`)
      )
    }
    if (request.execute) {
      const target: Q.Target =
        head.key === null ? { _tag: "ids", ids: [head.event_id] } : { _tag: "key", topic: head.topic, key: head.key }
      yield* move({ target, from: ["QUARANTINED", "HELD"], to: "RETRYING", by: request.by })
    }
    return { events: events.map(toEvent), to: "RETRYING", executed: request.execute }
  })

/**
 * Drops a quarantined event for good (never published); the events of its topic and key held
 * behind it are released and published in log order, unless another of them is quarantined.
 *
 * @since 0.1.0
 * @category operations
 */
export const skip = (request: Request): Effect.Effect<Plan, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const op = "log.quarantine.skip"
    const { move, slot, sql, table } = yield* open(request)
    const head = yield* find(sql, table, slot, request.eventId, op)
    if (head.status !== "QUARANTINED") {
      return yield* Effect.fail(
        refuse(op, `event ${head.event_id} is ${head.status}; only a QUARANTINED event is skipped`)
      )
    }
    if (request.execute) {
      yield* move({
        target: { _tag: "ids", ids: [head.event_id] },
        from: ["QUARANTINED"],
        to: "SKIPPED",
        by: request.by
      })
      const rest = yield* openOfKey(sql, table, slot, head)
      const followers = rest.filter((e) => e.event_id !== head.event_id)
      if (followers.length > 0 && !followers.some((e) => e.status === "QUARANTINED")) {
        const ids = followers.map((e) => e.event_id)
        yield* move({ target: { _tag: "ids", ids }, from: ["HELD"], to: "RETRYING", by: request.by })
      }
    }
    return { events: [toEvent(head)], to: "SKIPPED", executed: request.execute }
  })
