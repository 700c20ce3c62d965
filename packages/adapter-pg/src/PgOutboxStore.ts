/**
 * The outbox table on PostgreSQL: the core `OutboxStore` port over `<prefix>message`.
 *
 * - `insert` runs on the ambient `SqlClient` transaction (R1.1): one statement for the batch
 *   (`unnest` of typed arrays), `seq` assigned in the batch's order. With `notify` on, the same
 *   statement queues the wake-up `pg_notify` (delivered on commit, dropped on rollback), and the
 *   `PgWakeUp.notify` that `Outbox.enqueue` calls next in that transaction skips its own round trip.
 * - `claim` is one round trip to the `<prefix>claim` PL/pgSQL function: per-key advisory locks
 *   then a fresh snapshot, so two relays never split a key (see `docs/postgres.md`).
 * - `transition` is one statement per batch: lock the rows, decide each compare-and-set, update,
 *   report outcomes in request order.
 * - `purge` deletes in bounded batches, skips locked rows and lets one cleaner run at a time.
 *
 * @since 0.1.0
 */
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import {
  type ListFilter,
  type OutboxStats,
  OutboxStore,
  type TransitionOutcome,
  type TransitionRequest
} from "@effect-outbox/core/OutboxStore"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import { fromSqlError, invalid, isUuid, run } from "./internal/errors.ts"
import { currentLevel, markNotified } from "./internal/notified.ts"
import { bySeq, type MessageRow, millis, toMessage } from "./internal/rows.ts"
import { fromMillis, statusList } from "./internal/sql.ts"
import { PgTables, type Tables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Queue the wake-up `NOTIFY` inside the insert statement when it stores `PENDING` rows.
   * Default `false` here; `PgOutbox.layer` turns it on together with `PgWakeUp`.
   */
  readonly notify?: boolean | undefined
  /** Payloads above this many bytes are refused before anything is written. Default 1 MiB. */
  readonly maxPayloadBytes?: number | undefined
  /** Append every applied transition to `<prefix>transition` in the same statement. Default `false`. */
  readonly recordTransitions?: boolean | undefined
}

const knownStatuses: ReadonlySet<string> = new Set(statusList)

const typedArray = (values: ReadonlyArray<unknown>, oid: number): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, oid))

const ts = (ms: number) => PgTypes.timestamptz(ms)

const validateInsert = (messages: ReadonlyArray<NewOutboxMessage>, maxPayloadBytes: number) => {
  const seen = new Set<string>()
  for (const m of messages) {
    if (typeof m.id !== "string" || !isUuid(m.id)) return invalid("outbox.insert", `id "${m.id}" is not a UUID`)
    if (seen.has(m.id)) return invalid("outbox.insert", `id ${m.id} appears twice in one insert`)
    seen.add(m.id)
    if (m.topic.length === 0) return invalid("outbox.insert", `event ${m.id} has an empty topic`)
    if (m.partition !== null && (!Number.isInteger(m.partition) || m.partition < 0 || m.partition > 2147483647)) {
      return invalid("outbox.insert", `event ${m.id} has partition ${m.partition}; expected a non-negative int32`)
    }
    if (!(m.payload instanceof Uint8Array)) return invalid("outbox.insert", `event ${m.id} has a payload that is not bytes`)
    if (m.payload.byteLength > maxPayloadBytes) {
      return invalid("outbox.insert", `event ${m.id} has a ${m.payload.byteLength}-byte payload; the limit is ${maxPayloadBytes}`)
    }
    if (m.status !== "PENDING" && m.status !== "PREQUEUED") {
      return invalid("outbox.insert", `event ${m.id} starts as ${m.status}; only PENDING or PREQUEUED may be inserted`)
    }
    if (!Number.isFinite(m.availableAt) || !Number.isFinite(m.createdAt)) {
      return invalid("outbox.insert", `event ${m.id} has a non-finite time`)
    }
  }
  return undefined
}

/** What one transition request becomes on the wire: a record of `jsonb_to_recordset`. */
const encodeRequest = (r: TransitionRequest, idx: number) => ({
  idx,
  id: r.id,
  from_statuses: r.from,
  to_status: r.to,
  accept_if_in: r.acceptIfIn ?? [],
  lease_owner: r.leaseOwner ?? null,
  attempts: r.patch.attempts ?? null,
  available_at_ms: r.patch.availableAt ?? null,
  set_last_error: r.patch.lastError !== undefined,
  last_error: r.patch.lastError ?? null,
  receipt_partition: r.patch.receipt?.partition ?? null,
  receipt_offset: r.patch.receipt?.offset ?? null,
  lease_action: r.patch.lease === undefined ? "keep" : r.patch.lease === null ? "clear" : "set",
  lease_set_owner: r.patch.lease?.owner ?? null,
  lease_set_expires_ms: r.patch.lease?.expiresAt ?? null,
  published_at_ms: r.patch.publishedAt ?? null,
  processed_at_ms: r.patch.processedAt ?? null,
  now_ms: r.now
})

const transitionStatement = (t: Tables, recordTransitions: boolean) => {
  const applied = `l.outcome = 'applied'`
  const history = recordTransitions
    ? `, history AS (
         INSERT INTO ${t.transition} (event_id, from_status, to_status, lease_owner, at)
         SELECT l.id, l.old_status, c.status, r.lease_owner, ${fromMillis("r.now_ms")}
           FROM changed c JOIN locked l ON l.idx = c.idx JOIN req r ON r.idx = c.idx
          WHERE l.outcome = 'applied'
       )`
    : ""
  return `
    WITH req AS (
      SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(
        idx integer, id uuid, from_statuses text[], to_status text, accept_if_in text[], lease_owner text,
        attempts integer, available_at_ms float8, set_last_error boolean, last_error text,
        receipt_partition integer, receipt_offset text, lease_action text, lease_set_owner text,
        lease_set_expires_ms float8, published_at_ms float8, processed_at_ms float8, now_ms float8)
    ), locked AS (
      -- Lock first, in id order (no deadlock between two batches), then decide on the row as it
      -- is now: a locking read returns the latest committed version.
      SELECT r.idx, m.id, m.status AS old_status,
             CASE WHEN m.status = ANY (r.from_statuses)
                       AND (r.lease_owner IS NULL OR m.lease_owner IS NOT DISTINCT FROM r.lease_owner)
                    THEN 'applied'
                  WHEN m.status = ANY (r.accept_if_in) THEN 'already_advanced'
                  ELSE 'rejected' END AS outcome
        FROM req r JOIN ${t.message} m ON m.id = r.id
       ORDER BY m.id
         FOR UPDATE OF m
    ), changed AS (
      UPDATE ${t.message} m SET
        status = CASE WHEN ${applied} THEN r.to_status ELSE m.status END,
        attempts = CASE WHEN ${applied} AND r.attempts IS NOT NULL THEN r.attempts ELSE m.attempts END,
        available_at = CASE WHEN ${applied} AND r.available_at_ms IS NOT NULL
                            THEN ${fromMillis("r.available_at_ms")} ELSE m.available_at END,
        last_error = CASE WHEN ${applied} AND r.set_last_error THEN r.last_error ELSE m.last_error END,
        published_partition = COALESCE(r.receipt_partition, m.published_partition),
        published_offset = COALESCE(r.receipt_offset::bigint, m.published_offset),
        lease_owner = CASE WHEN NOT ${applied} THEN m.lease_owner
                           WHEN r.to_status <> 'DISPATCHING' OR r.lease_action = 'clear' THEN NULL
                           WHEN r.lease_action = 'set' THEN r.lease_set_owner
                           ELSE m.lease_owner END,
        lease_expires_at = CASE WHEN NOT ${applied} THEN m.lease_expires_at
                                WHEN r.to_status <> 'DISPATCHING' OR r.lease_action = 'clear' THEN NULL
                                WHEN r.lease_action = 'set' THEN ${fromMillis("r.lease_set_expires_ms")}
                                ELSE m.lease_expires_at END,
        published_at = CASE WHEN r.published_at_ms IS NOT NULL
                            THEN ${fromMillis("r.published_at_ms")} ELSE m.published_at END,
        processed_at = CASE WHEN ${applied} AND r.processed_at_ms IS NOT NULL
                            THEN ${fromMillis("r.processed_at_ms")} ELSE m.processed_at END,
        -- A late receipt on a row that moved on is bookkeeping, not a change of state.
        updated_at = CASE WHEN ${applied} THEN ${fromMillis("r.now_ms")} ELSE m.updated_at END
      FROM locked l JOIN req r ON r.idx = l.idx
      WHERE m.id = l.id
        AND (l.outcome = 'applied'
             OR (l.outcome = 'already_advanced' AND (r.receipt_partition IS NOT NULL OR r.published_at_ms IS NOT NULL)))
      RETURNING l.idx, m.status
    )${history}
    SELECT r.idx, COALESCE(l.outcome, 'rejected') AS outcome, COALESCE(c.status, l.old_status) AS current
      FROM req r LEFT JOIN locked l ON l.idx = r.idx LEFT JOIN changed c ON c.idx = r.idx
     ORDER BY r.idx`
}

/** Splits a batch into rounds of distinct ids, so a repeated id is applied after the first. */
const rounds = (requests: ReadonlyArray<TransitionRequest>) => {
  const out: Array<Array<readonly [TransitionRequest, number]>> = []
  const placed = new Map<string, number>()
  requests.forEach((request, index) => {
    const round = (placed.get(request.id) ?? -1) + 1
    placed.set(request.id, round)
    if (out[round] === undefined) out[round] = []
    out[round].push([request, index])
  })
  return out
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    const maxPayloadBytes = options.maxPayloadBytes ?? 1024 * 1024
    const notify = options.notify ?? false
    const message = sql.literal(t.message)
    const transitionSql = transitionStatement(t, options.recordTransitions ?? false)

    const insert = (messages: ReadonlyArray<NewOutboxMessage>): Effect.Effect<void, OutboxStoreError> => {
      if (messages.length === 0) return Effect.void
      const bad = validateInsert(messages, maxPayloadBytes)
      if (bad !== undefined) return Effect.fail(bad)
      const columns = sql`SELECT u.id, u.topic, u.key, u.partition, u.headers, u.payload, u.status,
                                 u.available_at, u.created_at, u.created_at
                            FROM unnest(
                              ${typedArray(messages.map((m) => m.id), PgTypes.OID.uuid)}::uuid[],
                              ${typedArray(messages.map((m) => m.topic), PgTypes.OID.text)}::text[],
                              ${typedArray(messages.map((m) => m.key), PgTypes.OID.text)}::text[],
                              ${typedArray(messages.map((m) => m.partition), PgTypes.OID.int4)}::int4[],
                              ${typedArray(messages.map((m) => m.headers), PgTypes.OID.jsonb)}::jsonb[],
                              ${typedArray(messages.map((m) => m.payload), PgTypes.OID.bytea)}::bytea[],
                              ${typedArray(messages.map((m) => m.status), PgTypes.OID.text)}::text[],
                              ${typedArray(messages.map((m) => m.availableAt), PgTypes.OID.timestamptz)}::timestamptz[],
                              ${typedArray(messages.map((m) => m.createdAt), PgTypes.OID.timestamptz)}::timestamptz[]
                            ) WITH ORDINALITY AS u(id, topic, key, partition, headers, payload, status,
                                                   available_at, created_at, ord)
                           ORDER BY u.ord`
      const target = sql`INSERT INTO ${message}
        (id, topic, key, partition, headers, payload, status, available_at, created_at, updated_at)`
      const withNotify = notify && messages.some((m) => m.status === "PENDING")
      const statement = withNotify
        ? sql`WITH inserted AS (${target} ${columns} RETURNING 1)
              SELECT pg_notify(${t.channel}::text, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS one`
        : sql`${target} ${columns}`
      return Effect.gen(function*() {
        const level = yield* currentLevel(sql)
        yield* statement.withoutTransform
        if (withNotify) markNotified(level)
      }).pipe(
        Effect.asVoid,
        Effect.mapError((error) =>
          error.reason._tag === "UniqueViolation"
            ? new OutboxStoreError({
              operation: "outbox.insert",
              reason: `an event with one of these ids already exists (${messages.map((m) => m.id).join(", ")})`,
              retriable: false,
              cause: error
            })
            : fromSqlError("outbox.insert")(error)
        ),
        Effect.withSpan("pg.outbox.insert")
      )
    }

    return OutboxStore.of({
      insert,

      claim: (request) => {
        if (request.limit <= 0) return Effect.succeed([])
        return sql<MessageRow>`SELECT * FROM ${sql.literal(t.claimFunction)}(
            ${request.owner}::text, ${Math.trunc(request.limit)}::int4, ${Math.max(1, Math.trunc(request.maxPerKey))}::int4,
            ${ts(request.now)}, ${ts(request.now + request.leaseMillis)})`.withoutTransform.pipe(
          Effect.map((rows) => rows.map(toMessage).sort(bySeq)),
          run("outbox.claim")
        )
      },

      transition: (requests) => {
        if (requests.length === 0) return Effect.succeed([])
        return Effect.forEach(rounds(requests), (round) =>
          sql.unsafe<{ idx: number; outcome: TransitionOutcome["outcome"]; current: OutboxStatus | null }>(
            transitionSql,
            [PgTypes.jsonb(round.map(([request], idx) => encodeRequest(request, idx)))]
          ).withoutTransform.pipe(
            Effect.map((rows) => rows.map((row) => [round[row.idx]![1], row] as const))
          ), { concurrency: 1 }).pipe(
          Effect.map((results) => {
            const out: Array<TransitionOutcome> = new Array(requests.length)
            for (const [index, row] of results.flat()) {
              out[index] = { id: requests[index]!.id, outcome: row.outcome, current: row.current ?? undefined }
            }
            return out
          }),
          run("outbox.transition")
        )
      },

      findStale: (now, limit) =>
        sql<MessageRow>`SELECT * FROM ${message}
          WHERE status = 'DISPATCHING' AND lease_expires_at < ${ts(now)}
          ORDER BY lease_expires_at, seq LIMIT ${Math.max(0, Math.trunc(limit))}`.withoutTransform.pipe(
          Effect.map((rows) => rows.map(toMessage)),
          run("outbox.findStale")
        ),

      get: (id) =>
        isUuid(id)
          ? sql<MessageRow>`SELECT * FROM ${message} WHERE id = ${id}::uuid`.withoutTransform.pipe(
            Effect.map((rows) => rows.length === 0 ? Option.none<OutboxMessage>() : Option.some(toMessage(rows[0]!))),
            run("outbox.get")
          )
          : Effect.succeed(Option.none()),

      list: (filter: ListFilter) => {
        const statuses = filter.statuses?.filter((s) => knownStatuses.has(s))
        const ids = filter.ids?.filter(isUuid)
        const clauses = [
          statuses === undefined ? undefined : sql`status = ANY (${typedArray(statuses, PgTypes.OID.text)})`,
          filter.topic === undefined ? undefined : sql`topic = ${filter.topic}`,
          ids === undefined ? undefined : sql`id = ANY (${typedArray(ids, PgTypes.OID.uuid)})`,
          filter.createdBefore === undefined ? undefined : sql`created_at < ${ts(filter.createdBefore)}`
        ].filter((c) => c !== undefined)
        return sql<MessageRow>`SELECT * FROM ${message} WHERE ${sql.and(clauses)}
          ORDER BY seq LIMIT ${Math.max(0, Math.trunc(filter.limit))}`.withoutTransform.pipe(
          Effect.map((rows) => rows.map(toMessage)),
          run("outbox.list")
        )
      },

      stats: (now) =>
        sql<{ by_status: Record<string, number> | string; oldest: Date | null; stale: number }>`SELECT
            (SELECT COALESCE(jsonb_object_agg(s.status, s.n), '{}'::jsonb)
               FROM (SELECT status, count(*)::int AS n FROM ${message} GROUP BY status) s) AS by_status,
            (SELECT min(created_at) FROM ${message} WHERE status = 'PENDING') AS oldest,
            (SELECT count(*)::int FROM ${message}
              WHERE status = 'DISPATCHING' AND lease_expires_at < ${ts(now)}) AS stale`.withoutTransform.pipe(
          Effect.map(([row]): OutboxStats => ({
            byStatus: (typeof row!.by_status === "string" ? JSON.parse(row!.by_status) : row!.by_status) as OutboxStats[
              "byStatus"
            ],
            oldestPendingCreatedAt: row!.oldest === null ? null : millis(row!.oldest),
            staleLeases: row!.stale
          })),
          run("outbox.stats")
        ),

      purge: ({ limit, olderThan, statuses }) => {
        const wanted = statuses.filter((s) => knownStatuses.has(s))
        if (limit <= 0 || wanted.length === 0) return Effect.succeed(0)
        // One cleaner at a time (try-lock, never wait) and SKIP LOCKED: a purge never queues
        // behind a claim or a transition, and they never queue behind it.
        return sql<{ n: number }>`WITH gate AS (
              SELECT pg_try_advisory_xact_lock(${t.locks.purge}, 0) AS ok
            ), victims AS (
              SELECT m.id FROM ${message} m, gate
               WHERE gate.ok AND m.status = ANY (${typedArray(wanted, PgTypes.OID.text)})
                 AND m.updated_at < ${ts(olderThan)}
               LIMIT ${Math.trunc(limit)}
                 FOR UPDATE OF m SKIP LOCKED
            ), deleted AS (
              DELETE FROM ${message} m USING victims v WHERE m.id = v.id RETURNING 1
            )
            SELECT count(*)::int AS n FROM deleted`.withoutTransform.pipe(
          Effect.map(([row]) => row!.n),
          run("outbox.purge")
        )
      }
    })
  })

/**
 * The store over the ambient `SqlClient`, in the tables of {@link PgTables}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<OutboxStore, never, SqlClient.SqlClient | PgTables> =>
  Layer.effect(OutboxStore)(make(options))

