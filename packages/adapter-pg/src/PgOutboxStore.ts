/**
 * The outbox table on PostgreSQL: the core `OutboxStore` port over `<prefix>message`.
 *
 * - `insert` runs on the ambient `SqlClient` transaction (R1.1): one statement for the batch
 *   (`unnest` of typed arrays), `seq` assigned in the batch's order. With `notify` on (the
 *   in-transaction wake-up mode), the same statement queues the wake-up `pg_notify` (delivered on
 *   commit, dropped on rollback), and the `PgWakeUp.notify` that `Outbox.enqueue` calls next in
 *   that `PgTransactor` transaction skips its own round trip.
 * - `claim` is one round trip to the `<prefix>claim` PL/pgSQL function: per-key advisory locks
 *   then a fresh snapshot, so two relays never split a key (see `docs/postgres.md`).
 * - `transition` is one statement per batch: lock the rows, decide each compare-and-set, update,
 *   report outcomes in request order.
 * - `purge` deletes in bounded batches, skips locked rows and lets one cleaner run at a time; the
 *   recorded transitions (`<prefix>transition`) of the rows it deletes go in the same statement.
 *
 * @since 0.1.0
 */

import * as PgTypes from "@effect/sql-pg/PgTypes"
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import {
  type ListFilter,
  type OutboxStats,
  OutboxStore,
  type StalePage,
  type TransitionOutcome,
  type TransitionRequest
} from "@effect-outbox/core/OutboxStore"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import { fromSqlError, invalid, isUuid, run } from "./internal/errors.ts"
import { bySeq, type MessageRow, millis, toMessage } from "./internal/rows.ts"
import { countByStatus, notQueued, queuedStatuses, statusList } from "./internal/sql.ts"
import { CurrentTransaction } from "./internal/transaction.ts"
import { encodeRequest, fastStatement, genericStatement, uniform } from "./internal/transition.ts"
import { PgTables, type Tables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Queue the wake-up `NOTIFY` inside the insert statement when it stores `PENDING` rows (the
   * in-transaction mode; it serialises concurrent commits). Default `false`; `PgOutbox.layer`
   * turns it on with `wakeUp.notifyInTransaction`.
   */
  readonly notify?: boolean | undefined
  /**
   * Records (key + headers + payload, `RecordSize.singleRecordBatchBytes`) above this many bytes
   * are refused before anything is written: the same rule and default as `Outbox` (1,048,588),
   * a last guard for callers that insert without it.
   */
  readonly maxRecordBytes?: number | undefined
  /** @deprecated read as `maxRecordBytes` when that is not given. */
  readonly maxPayloadBytes?: number | undefined
  /** Append every applied transition to `<prefix>transition` in the same statement. Default `false`. */
  readonly recordTransitions?: boolean | undefined
  /**
   * The relay's calls (`claim`, `transition`, `findStale`) give up after this long with a
   * retriable `OutboxStoreError` and cancel their statement, so a half-open connection or a
   * stuck lock cannot hang a relay (review M6); the relay retries at its next poll. Default 30 s.
   */
  readonly callTimeout?: Duration.Input | undefined
}

const knownStatuses: ReadonlySet<string> = new Set(statusList)
const queuedSet: ReadonlySet<string> = new Set(queuedStatuses)

const typedArray = (values: ReadonlyArray<unknown>, oid: number): PgTypes.Parameter =>
  Result.getOrThrow(PgTypes.array(values, oid))

const ts = (ms: number) => PgTypes.timestamptz(ms)

const validateInsert = (messages: ReadonlyArray<NewOutboxMessage>, maxRecordBytes: number) => {
  const seen = new Set<string>()
  for (const m of messages) {
    if (typeof m.id !== "string" || !isUuid(m.id)) return invalid("outbox.insert", `id "${m.id}" is not a UUID`)
    if (seen.has(m.id)) return invalid("outbox.insert", `id ${m.id} appears twice in one insert`)
    seen.add(m.id)
    if (m.topic.length === 0) return invalid("outbox.insert", `event ${m.id} has an empty topic`)
    if (m.partition !== null && (!Number.isInteger(m.partition) || m.partition < 0 || m.partition > 2147483647)) {
      return invalid("outbox.insert", `event ${m.id} has partition ${m.partition}; expected a non-negative int32`)
    }
    if (!(m.payload instanceof Uint8Array))
      return invalid("outbox.insert", `event ${m.id} has a payload that is not bytes`)
    if (RecordSize.singleRecordBatchBytes(m) > maxRecordBytes) {
      return invalid("outbox.insert", `event ${m.id}: ${RecordSize.describeTooLarge(m, maxRecordBytes)}`)
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

const fastEncodable = (r: TransitionRequest) =>
  isUuid(r.id) &&
  (r.patch.receipt === undefined ||
    (Number.isInteger(r.patch.receipt.partition) &&
      r.patch.receipt.partition >= -2147483648 &&
      r.patch.receipt.partition <= 2147483647))

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
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    const maxRecordBytes = options.maxRecordBytes ?? options.maxPayloadBytes ?? RecordSize.DEFAULT_MAX_MESSAGE_BYTES
    const notify = options.notify ?? false
    const message = sql.literal(t.message)
    const lease = sql.literal(t.lease)
    const recordTransitions = options.recordTransitions ?? false
    const genericSql = genericStatement(t, recordTransitions)
    const fastSql = fastStatement(t, recordTransitions)
    const callTimeout = Duration.fromInputUnsafe(options.callTimeout ?? Duration.seconds(30))
    const bounded =
      (operation: string) =>
      <A, R>(effect: Effect.Effect<A, OutboxStoreError, R>) =>
        Effect.timeoutOrElse(effect, {
          duration: callTimeout,
          orElse: () =>
            Effect.fail(
              new OutboxStoreError({
                operation,
                reason:
                  `no answer from PostgreSQL within ${Duration.format(callTimeout)} (a half-open connection, ` +
                  `or a lock held elsewhere); the statement was cancelled, retry`,
                retriable: true
              })
            )
        })

    type Row = { readonly outcome: TransitionOutcome["outcome"]; readonly current: OutboxStatus | null }
    type Round = ReadonlyArray<readonly [TransitionRequest, number]>

    // Any round: one statement, outcomes decided per row (the generic compare-and-set).
    const generic = (round: Round) =>
      sql
        .unsafe<{ idx: number } & Row>(genericSql, [
          PgTypes.jsonb(round.map(([request], idx) => encodeRequest(request, idx)))
        ])
        .withoutTransform.pipe(Effect.map((rows) => rows.map((row) => [round[row.idx]![1], row] as const)))

    // A uniform round (the relay's mark): a plain UPDATE over typed arrays for the rows that
    // match, the generic statement only for the rest (already advanced, rejected, missing).
    const transitionRound = (round: Round) => {
      const shape = uniform(round.map(([request]) => request))
      // Anything the typed arrays cannot carry (not a UUID, a partition outside int4) fails in the
      // generic statement, as a typed error, exactly as it did before the fast path.
      if (shape === undefined || !round.every(([r]) => fastEncodable(r))) return generic(round)
      const sorted = [...round].sort(([a], [b]) => (a.id.toLowerCase() < b.id.toLowerCase() ? -1 : 1))
      const fast = sql.unsafe<{ id: string }>(fastSql, [
        typedArray(
          sorted.map(([r]) => r.id),
          PgTypes.OID.uuid
        ),
        typedArray(
          sorted.map(([r]) => r.patch.receipt?.partition ?? null),
          PgTypes.OID.int4
        ),
        typedArray(
          sorted.map(([r]) => r.patch.receipt?.offset ?? null),
          PgTypes.OID.text
        ),
        PgTypes.text(shape.from),
        PgTypes.text(shape.to),
        PgTypes.text(shape.leaseOwner),
        PgTypes.float8(shape.now),
        PgTypes.float8(shape.publishedAt),
        PgTypes.bool(shape.setLastError),
        PgTypes.text(shape.lastError)
      ]).withoutTransform
      return Effect.flatMap(fast, (moved) => {
        const done = new Set(moved.map((row) => row.id.toLowerCase()))
        const applied = round
          .filter(([r]) => done.has(r.id.toLowerCase()))
          .map(([, index]) => [index, { outcome: "applied", current: shape.to as OutboxStatus }] as const)
        const rest = round.filter(([r]) => !done.has(r.id.toLowerCase()))
        return rest.length === 0 ? Effect.succeed(applied) : Effect.map(generic(rest), (rows) => [...applied, ...rows])
      })
    }

    const insert = (messages: ReadonlyArray<NewOutboxMessage>): Effect.Effect<void, OutboxStoreError> => {
      if (messages.length === 0) return Effect.void
      const bad = validateInsert(messages, maxRecordBytes)
      if (bad !== undefined) return Effect.fail(bad)
      const one = messages.length === 1 ? messages[0]! : undefined
      // One row (the usual enqueue): a plain VALUES list, cheaper to plan than unnest over nine
      // arrays (issue #14: ×0.79 of the same row inserted by hand, one client).
      const columns =
        one !== undefined
          ? sql`VALUES (${PgTypes.uuid(one.id)}, ${PgTypes.text(one.topic)}, ${PgTypes.text(one.key)}, ${PgTypes.int4(
              one.partition
            )}, ${PgTypes.jsonb(one.headers)}, ${one.payload}, ${PgTypes.text(one.status)}, ${ts(one.availableAt)}, ${ts(
              one.createdAt
            )}, ${ts(one.createdAt)})`
          : sql`SELECT u.id, u.topic, u.key, u.partition, u.headers, u.payload, u.status,
                                 u.available_at, u.created_at, u.created_at
                            FROM unnest(
                              ${typedArray(
                                messages.map((m) => m.id),
                                PgTypes.OID.uuid
                              )}::uuid[],
                              ${typedArray(
                                messages.map((m) => m.topic),
                                PgTypes.OID.text
                              )}::text[],
                              ${typedArray(
                                messages.map((m) => m.key),
                                PgTypes.OID.text
                              )}::text[],
                              ${typedArray(
                                messages.map((m) => m.partition),
                                PgTypes.OID.int4
                              )}::int4[],
                              ${typedArray(
                                messages.map((m) => m.headers),
                                PgTypes.OID.jsonb
                              )}::jsonb[],
                              ${typedArray(
                                messages.map((m) => m.payload),
                                PgTypes.OID.bytea
                              )}::bytea[],
                              ${typedArray(
                                messages.map((m) => m.status),
                                PgTypes.OID.text
                              )}::text[],
                              ${typedArray(
                                messages.map((m) => m.availableAt),
                                PgTypes.OID.timestamptz
                              )}::timestamptz[],
                              ${typedArray(
                                messages.map((m) => m.createdAt),
                                PgTypes.OID.timestamptz
                              )}::timestamptz[]
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
      return Effect.gen(function* () {
        yield* statement.withoutTransform
        if (withNotify) {
          const state = yield* CurrentTransaction
          if (state !== undefined) state.notified = true
        }
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
            ${ts(request.now)}, ${Math.max(0, Math.trunc(request.leaseMillis))}::int8,
            ${(request.failedHead ?? "block") === "block"}::bool)`.withoutTransform.pipe(
          Effect.map((rows) => rows.map(toMessage).sort(bySeq)),
          run("outbox.claim"),
          bounded("outbox.claim")
        )
      },

      transition: (requests) => {
        if (requests.length === 0) return Effect.succeed([])
        return Effect.forEach(rounds(requests), transitionRound, { concurrency: 1 }).pipe(
          Effect.map((results) => {
            const out: Array<TransitionOutcome> = new Array(requests.length)
            for (const [index, row] of results.flat()) {
              out[index] = { id: requests[index]!.id, outcome: row.outcome, current: row.current ?? undefined }
            }
            return out
          }),
          run("outbox.transition"),
          bounded("outbox.transition")
        )
      },

      findStale: (request) => {
        const limit = Math.max(0, Math.trunc(request.limit))
        // Expiry by the database clock unless a caller drives time (M9); the cursor compares
        // whole milliseconds, as the page reports them.
        const clock = request.now === undefined ? sql`now()` : sql`${ts(request.now)}::timestamptz`
        const after =
          request.after === undefined
            ? sql`true`
            : sql`(lease_ms, seq) > (${request.after.leaseExpiresAt}::float8, ${request.after.seq}::int8)`
        return sql<MessageRow & { clock_ms: number; lease_ms: number | null; in_page: boolean | null }>`
          WITH clock AS (SELECT ${clock} AS now),
          expired AS (
            SELECT m.*, floor(extract(epoch FROM m.lease_expires_at) * 1000)::float8 AS lease_ms
              FROM ${message} m, clock
             WHERE m.status = 'DISPATCHING' AND m.lease_expires_at < clock.now
          ),
          page AS (
            SELECT id, key FROM expired WHERE ${after} ORDER BY lease_ms, seq LIMIT ${limit}
          )
          SELECT (extract(epoch FROM clock.now) * 1000)::float8 AS clock_ms, r.*
            FROM clock LEFT JOIN (
              SELECT e.*, e.id IN (SELECT id FROM page) AS in_page
                FROM expired e
               WHERE e.id IN (SELECT id FROM page)
                  OR e.key IN (SELECT key FROM page WHERE key IS NOT NULL)
            ) r ON true
           ORDER BY r.lease_ms, r.seq`.withoutTransform.pipe(
          Effect.map((rows): StalePage => {
            const found = rows.filter((row) => row.id !== null)
            const page = found.filter((row) => row.in_page === true)
            const last = page[page.length - 1]
            return {
              rows: found.map(toMessage),
              now: Number(rows[0]!.clock_ms),
              next:
                last !== undefined && page.length >= limit
                  ? { leaseExpiresAt: Number(last.lease_ms), seq: Number(last.seq) }
                  : undefined
            }
          }),
          run("outbox.findStale"),
          bounded("outbox.findStale")
        )
      },

      acquireRecoveryLease: ({ owner, ttlMillis }) =>
        sql<{ acquired: boolean; owner: string; expires_at: Date | number | string }>`
          WITH taken AS (
            INSERT INTO ${lease} AS l (name, owner, expires_at)
            VALUES ('stale_recovery', ${owner}, now() + ${Math.max(0, ttlMillis)}::float8 * interval '1 millisecond')
            ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
              WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
            RETURNING l.owner, l.expires_at
          )
          SELECT true AS acquired, owner, expires_at FROM taken
          UNION ALL
          SELECT false, owner, expires_at FROM ${lease}
           WHERE name = 'stale_recovery' AND NOT EXISTS (SELECT 1 FROM taken)`.withoutTransform.pipe(
          Effect.map(([row]) => ({ acquired: row!.acquired, owner: row!.owner, expiresAt: millis(row!.expires_at) })),
          run("outbox.acquireRecoveryLease")
        ),

      releaseRecoveryLease: (owner) =>
        sql`DELETE FROM ${lease} WHERE name = 'stale_recovery' AND owner = ${owner}`.withoutTransform.pipe(
          Effect.asVoid,
          run("outbox.releaseRecoveryLease")
        ),

      get: (id) =>
        isUuid(id)
          ? sql<MessageRow>`SELECT * FROM ${message} WHERE id = ${id}::uuid`.withoutTransform.pipe(
              Effect.map((rows) =>
                rows.length === 0 ? Option.none<OutboxMessage>() : Option.some(toMessage(rows[0]!))
              ),
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
          filter.createdBefore === undefined ? undefined : sql`created_at < ${ts(filter.createdBefore)}`,
          filter.updatedBefore === undefined ? undefined : sql`updated_at < ${ts(filter.updatedBefore)}`,
          filter.afterSeq === undefined ? undefined : sql`seq > ${Math.trunc(filter.afterSeq)}`
        ].filter((c) => c !== undefined)
        return sql<MessageRow>`SELECT * FROM ${message} WHERE ${sql.and(clauses)}
          ORDER BY seq LIMIT ${Math.max(0, Math.trunc(filter.limit))}`.withoutTransform.pipe(
          Effect.map((rows) => rows.map(toMessage)),
          run("outbox.list")
        )
      },

      stats: (now) =>
        sql<{ by_status: Record<string, number> | string; oldest: Date | null; stale: number; blocked: number }>`SELECT
            (SELECT COALESCE(jsonb_object_agg(s.status, s.n), '{}'::jsonb)
               FROM (${sql.literal(countByStatus(t))}) s) AS by_status,
            (SELECT min(created_at) FROM ${message} WHERE status = 'PENDING') AS oldest,
            (SELECT count(*)::int FROM ${message}
              WHERE status = 'DISPATCHING' AND lease_expires_at < ${ts(now)}) AS stale,
            (SELECT count(DISTINCT key)::int FROM ${message}
              WHERE status = 'FAILURE' AND key IS NOT NULL) AS blocked`.withoutTransform.pipe(
          Effect.map(
            ([row]): OutboxStats => ({
              byStatus: (typeof row!.by_status === "string"
                ? JSON.parse(row!.by_status)
                : row!.by_status) as OutboxStats["byStatus"],
              oldestPendingCreatedAt: row!.oldest === null ? null : millis(row!.oldest),
              staleLeases: row!.stale,
              blockedKeys: row!.blocked
            })
          ),
          run("outbox.stats")
        ),

      purge: ({ limit, olderThan, statuses }) => {
        const wanted = statuses.filter((s) => knownStatuses.has(s))
        if (limit <= 0 || wanted.length === 0) return Effect.succeed(0)
        // Spelled out, so the planner can prove the `status_idx` predicate from the query text
        // (it cannot from a parameter array).
        const indexed = wanted.some((s) => queuedSet.has(s))
          ? sql.literal("")
          : sql.literal(`AND ${notQueued("m.status")}`)
        // One cleaner at a time (try-lock, never wait) and SKIP LOCKED: a purge never queues
        // behind a claim or a transition, and they never queue behind it.
        return sql<{ n: number }>`WITH gate AS (
              SELECT pg_try_advisory_xact_lock(${t.locks.purge}, 0) AS ok
            ), victims AS (
              SELECT m.id FROM ${message} m, gate
               WHERE gate.ok AND m.status = ANY (${typedArray(wanted, PgTypes.OID.text)})
                 ${indexed} AND m.updated_at < ${ts(olderThan)}
               LIMIT ${Math.trunc(limit)}
                 FOR UPDATE OF m SKIP LOCKED
            ), deleted AS (
              DELETE FROM ${message} m USING victims v WHERE m.id = v.id RETURNING m.id
            ), history AS (
              DELETE FROM ${sql.literal(t.transition)} h USING deleted d WHERE h.event_id = d.id
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
