import type { RecoveryLease, StalePage, StaleRequest } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { ts } from "./params.ts"
import { type MessageRow, millis, toMessage } from "./rows.ts"

/**
 * One page of expired leases (`OutboxStore.findStale`), with every other expired row of the
 * page's keys. Expiry by the database clock unless a caller drives time; the cursor
 * compares whole milliseconds, as the page reports them.
 */
export const findStale =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (request: StaleRequest): Effect.Effect<StalePage, SqlError> => {
    const limit = Math.max(0, Math.trunc(request.limit))
    const clock = request.now === undefined ? sql`now()` : sql`${ts(request.now)}::timestamptz`
    const after =
      request.after === undefined
        ? sql`true`
        : sql`(lease_ms, seq) > (${request.after.leaseExpiresAt}::float8, ${request.after.seq}::int8)`
    return sql<MessageRow & { clock_ms: number; lease_ms: number | null; in_page: boolean | null }>`
      WITH clock AS (SELECT ${clock} AS now),
      expired AS (
        SELECT m.*, floor(extract(epoch FROM m.lease_expires_at) * 1000)::float8 AS lease_ms
          FROM ${sql.literal(t.message)} m, clock
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
      })
    )
  }

/** Takes or renews the stale-recovery lease (one recoverer per outbox), expiry by the database clock. */
export const acquireRecoveryLease =
  (sql: SqlClient.SqlClient, t: Tables) =>
  ({
    owner,
    ttlMillis
  }: {
    readonly owner: string
    readonly ttlMillis: number
  }): Effect.Effect<RecoveryLease, SqlError> => {
    const attempt = sql<{ acquired: boolean; owner: string; expires_at: Date | number | string }>`
      WITH taken AS (
        INSERT INTO ${sql.literal(t.lease)} AS l (name, owner, expires_at)
        VALUES ('stale_recovery', ${owner}, now() + ${Math.max(0, ttlMillis)}::float8 * interval '1 millisecond')
        ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
          WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
        RETURNING l.owner, l.expires_at
      )
      SELECT true AS acquired, owner, expires_at FROM taken
      UNION ALL
      SELECT false, owner, expires_at FROM ${sql.literal(t.lease)}
       WHERE name = 'stale_recovery' AND NOT EXISTS (SELECT 1 FROM taken)`.withoutTransform
    // A first insert racing another one waits for it, then loses the conflict; but the statement's
    // snapshot predates the winner's commit, so it reads no row at all. The next statement sees it.
    const once = (left: number): Effect.Effect<RecoveryLease, SqlError> =>
      Effect.flatMap(attempt, ([row]) =>
        row === undefined && left > 0
          ? once(left - 1)
          : Effect.succeed({
              acquired: row?.acquired ?? false,
              owner: row?.owner ?? "",
              expiresAt: row === undefined ? 0 : millis(row.expires_at)
            })
      )
    return once(3)
  }

/** Gives the stale-recovery lease up, when `owner` holds it. */
export const releaseRecoveryLease =
  (sql: SqlClient.SqlClient, t: Tables) =>
  (owner: string): Effect.Effect<void, SqlError> =>
    sql`DELETE FROM ${sql.literal(t.lease)} WHERE name = 'stale_recovery' AND owner = ${owner}`.withoutTransform.pipe(
      Effect.asVoid
    )

/**
 * A relay's heartbeat in the lease table (`relay:<owner>`, expiry by the database clock); the
 * same statement drops heartbeats lapsed for a day, so relays of past processes do not pile up.
 */
export const relayHeartbeat =
  (sql: SqlClient.SqlClient, t: Tables) =>
  ({ owner, ttlMillis }: { readonly owner: string; readonly ttlMillis: number }): Effect.Effect<void, SqlError> =>
    sql`WITH gone AS (
          DELETE FROM ${sql.literal(t.lease)}
           WHERE name LIKE 'relay:%' AND expires_at < now() - interval '1 day'
        )
        INSERT INTO ${sql.literal(t.lease)} AS l (name, owner, expires_at)
        VALUES (${`relay:${owner}`}, ${owner}, now() + ${Math.max(0, ttlMillis)}::float8 * interval '1 millisecond')
        ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at`.withoutTransform.pipe(
      Effect.asVoid
    )

/** The relays' heartbeats, latest first (at most 100). */
export const relayHeartbeats = (sql: SqlClient.SqlClient, t: Tables) =>
  sql<{ owner: string; expires_at: Date | number | string; alive: boolean }>`
    SELECT owner, expires_at, expires_at > now() AS alive FROM ${sql.literal(t.lease)}
     WHERE name LIKE 'relay:%' ORDER BY expires_at DESC LIMIT 100`.withoutTransform.pipe(
    Effect.map((rows) => rows.map((row) => ({ owner: row.owner, expiresAt: millis(row.expires_at), alive: row.alive })))
  )
