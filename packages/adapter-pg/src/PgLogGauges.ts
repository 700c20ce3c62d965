/**
 * The log slot's gauges over the pool, without the lease (`LogSource.gauges`): every relay
 * process samples them, holder or standby, so the alert on retained WAL fires while no relay
 * reads the slot. Also `wal_status` and `safe_wal_size`, and a warning when
 * `max_slot_wal_keep_size` is unlimited (a stopped relay then keeps WAL until the disk is full).
 *
 * `PgLogOutbox.layer` includes it.
 *
 * @since 0.1.0
 */
import { type LogGauges, LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
}

interface Row {
  readonly lag: number | null
  readonly retained: number | null
  readonly wal_status: string | null
  readonly safe: number | null
}

// On a server in recovery (a standby) positions are measured from the last replayed WAL.
const sampleSql = `WITH here AS (
    SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END AS lsn)
  SELECT pg_wal_lsn_diff(here.lsn, confirmed_flush_lsn)::float8 AS lag,
         pg_wal_lsn_diff(here.lsn, restart_lsn)::float8 AS retained,
         wal_status, safe_wal_size::float8 AS safe
    FROM pg_replication_slots, here WHERE slot_name = $1`

/**
 * One sample of the slot. A lost slot has no restart position: `retainedBytes` is `NaN` then
 * (not 0, which would look healthy), and `walStatus` says `lost`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sample = (slot: string): Effect.Effect<LogGauges, LogSourceError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql
      .unsafe<Row>(sampleSql, [slot])
      .withoutTransform.pipe(Effect.mapError(sqlFailed("log.gauges")))
    const row = rows[0]
    if (row === undefined) {
      return yield* new LogSourceError({ operation: "log.gauges", reason: `slot ${slot} is missing`, retriable: true })
    }
    return {
      lagBytes: row.lag === null ? Number.NaN : Number(row.lag),
      retainedBytes: row.retained === null ? Number.NaN : Number(row.retained),
      walStatus: row.wal_status ?? undefined,
      safeWalBytes: row.safe === null ? null : Number(row.safe)
    }
  })

/**
 * Gives the `LogSource` in context lease-free gauges for `slot`, and warns once at start-up when
 * `max_slot_wal_keep_size` is unlimited.
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
      yield* sql.unsafe<{ keep: string }>(`SELECT current_setting('max_slot_wal_keep_size') AS keep`).pipe(
        Effect.flatMap(([row]) =>
          row?.keep === "-1"
            ? Effect.logWarning(
                `log relay: max_slot_wal_keep_size is unlimited: while no relay reads slot ${slot}, PostgreSQL keeps its WAL until the disk is full; set a limit and alert on outbox_log_retained_wal_bytes (docs/log-relay-operations.md)`
              )
            : Effect.void
        ),
        Effect.ignore
      )
      return LogSource.of({ ...source, gauges: Effect.provideService(sample(slot), SqlClient.SqlClient, sql) })
    })
  )
