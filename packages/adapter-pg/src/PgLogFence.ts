/**
 * Fencing for the log relay on PostgreSQL (`LogLease.fence`). When a lease is taken, the session
 * holding the log's lease lock (the streaming transport's walsender, or the SQL transport's
 * reserved connection) is noted by its server process id. Before each window the relay asks the
 * server, over the pool, whether that session still holds the lock, and gives up unless the answer
 * comes within a bound below the server's `wal_sender_timeout` (a third of it, at most 5 s).
 *
 * So a relay whose connection went half-open stops publishing before the server can time its
 * walsender out and let a standby take the slot; and once the lease moved on, the old holder's
 * next window is refused. Cost: one round trip on the pool per window.
 *
 * `PgLogOutbox.layer` includes it.
 *
 * @since 0.1.0
 */
import { type LogLease, LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { sqlFailed } from "./internal/logQuarantine.ts"
import { DEFAULT_SLOT } from "./internal/logSetup.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Default `effect_outbox_log`. */
  readonly slot?: string | undefined
  /** The longest wait for the proof. Default: a third of `wal_sender_timeout`, at most 5 s. */
  readonly fenceTimeout?: Duration.Input | undefined
}

// The pid holding the log's lease lock (leaseLock.ts: two-key advisory lock, shown as oids).
const holderSql = `SELECT pid FROM pg_locks
   WHERE locktype = 'advisory' AND granted AND objsubid = 2
     AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND classid = ((hashtext('effect-outbox-log')::int8 + 4294967296) % 4294967296)::oid
     AND objid = ((hashtext($1)::int8 + 4294967296) % 4294967296)::oid`

/** A third of the server's `wal_sender_timeout` (ms; 0 disables it), at most 5 s. */
const defaultTimeout = (sql: SqlClient.SqlClient) =>
  sql
    .unsafe<{ ms: number }>(`SELECT setting::int8::float8 AS ms FROM pg_settings WHERE name = 'wal_sender_timeout'`)
    .pipe(
      Effect.map(([row]) => {
        const ms = Number(row?.ms ?? 0)
        return Duration.millis(ms > 0 ? Math.min(5_000, Math.floor(ms / 3)) : 5_000)
      }),
      Effect.orElseSucceed(() => Duration.seconds(5))
    )

/**
 * Gives every lease of the `LogSource` in context a fence.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<LogSource, never, LogSource | SqlClient.SqlClient> =>
  Layer.effect(LogSource)(
    Effect.gen(function* () {
      const source = yield* LogSource
      const sql = yield* SqlClient.SqlClient
      const slot = options.slot ?? DEFAULT_SLOT
      const holder = sql.unsafe<{ pid: number }>(holderSql, [slot]).pipe(
        Effect.map((rows) => rows[0]?.pid),
        Effect.mapError(sqlFailed("log.fence"))
      )
      const lost = (reason: string) =>
        new LogSourceError({ operation: "log.fence", reason: `the lease of slot ${slot} ${reason}`, retriable: true })
      const acquire: LogSource["Service"]["acquire"] = Effect.gen(function* () {
        const lease = yield* source.acquire
        if (Option.isNone(lease)) return lease
        const pid = yield* holder
        // No lock to point at (a source that leases otherwise): no fence.
        if (pid === undefined) return lease
        const timeout =
          options.fenceTimeout === undefined
            ? yield* defaultTimeout(sql)
            : Duration.fromInputUnsafe(options.fenceTimeout)
        const fence = holder.pipe(
          Effect.timeoutOrElse({
            duration: timeout,
            orElse: () => Effect.fail(lost(`could not be proven within ${Duration.format(timeout)}`))
          }),
          Effect.flatMap((now) =>
            now === pid ? Effect.void : Effect.fail(lost(`moved on (holder ${now ?? "none"}, was ${pid})`))
          ),
          Effect.withSpan("pg.log.fence", undefined, { captureStackTrace: false })
        )
        return Option.some<LogLease>({ ...lease.value, fence })
      })
      return LogSource.of({ ...source, acquire })
    })
  )
