/** The statements of the event table's retention (`PgLogRetention`). */
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { fromSqlError, sqlState } from "./errors.ts"
import { logError as mapLogError } from "./logSetup.ts"
import { boundsOf } from "./logTable.ts"

export const logError = mapLogError("log.retention")

/** One partition of the event table. */
export interface Partition {
  readonly name: string
  readonly from: number
  readonly to: number
  /** The seal's WAL position, or null while unsealed. */
  readonly sealed: string | null
  /** A concurrent detach began and did not finish. */
  readonly detaching: boolean
}

const quote = (name: string) => `"${name}"`

export const LogTable = (sql: SqlClient.SqlClient, t: Tables) => {
  const exec = (text: string, params: ReadonlyArray<unknown> = []) =>
    sql.unsafe(text, params as Array<unknown>).withoutTransform as Effect.Effect<ReadonlyArray<any>, SqlError>
  const qualified = (name: string) => `${quote(t.schema)}.${quote(name)}`

  const partitions: Effect.Effect<ReadonlyArray<Partition>, SqlError> = exec(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound, s.sealed_lsn::text AS sealed,
            i.inhdetachpending AS detaching
       FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid
       LEFT JOIN ${t.logPartition} s ON s.name = c.relname
      WHERE i.inhparent = '${t.logEvent}'::regclass`
  ).pipe(
    Effect.map((rows) =>
      rows
        .flatMap((row): Array<Partition> => {
          const bounds = boundsOf(String(row.bound))
          return bounds === undefined
            ? []
            : [{ name: row.name, ...bounds, sealed: row.sealed ?? null, detaching: row.detaching === true }]
        })
        .sort((a, b) => a.from - b.from)
    )
  )

  return {
    createAhead: (spanMs: number, aheadMs: number) =>
      exec(`SELECT ${t.logPartitionsFunction}($1::bigint, $2::bigint) AS made`, [spanMs, aheadMs]).pipe(
        Effect.map((rows) => Number(rows[0]?.made ?? 0))
      ),
    now: exec(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`).pipe(
      Effect.map((rows) => Number(rows[0]?.now))
    ),
    partitions,
    /**
     * The SHARE lock waits for every transaction that inserted into the partition (and keeps new
     * ones out while it is held): the position read after it is past all of their commits.
     * `false` when another round sealed it first.
     */
    seal: (name: string) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* exec(`SET LOCAL lock_timeout = '10s'`)
            yield* exec(`LOCK TABLE ${qualified(name)} IN SHARE MODE`)
            const rows = yield* exec(
              `INSERT INTO ${t.logPartition} (name, sealed_lsn) VALUES ($1, pg_current_wal_insert_lsn())
                 ON CONFLICT (name) DO NOTHING RETURNING name`,
              [name]
            )
            return rows.length > 0
          })
        )
        .pipe(
          Effect.catchTag("SqlError", (error) =>
            Effect.as(
              Effect.logWarning(
                `log retention: ${name} not sealed yet: ${fromSqlError("log.retention")(error).reason}`
              ),
              false
            )
          )
        ),
    /** The slot's confirmed position, or null when there is no slot. */
    confirmed: (slot: string) =>
      exec(`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1`, [slot]).pipe(
        Effect.map((rows): string | null => (typeof rows[0]?.lsn === "string" ? rows[0].lsn : null))
      ),
    covers: (confirmed: string, sealed: string) =>
      exec(`SELECT $1::pg_lsn >= $2::pg_lsn AS ok`, [confirmed, sealed]).pipe(
        Effect.map((rows) => rows[0]?.ok === true)
      ),
    /**
     * Detached without blocking the other partitions' writers, then dropped; the seal goes last.
     * `false` when it did not finish (another process's round detaching it at the same time, a
     * lock timeout): logged, and the next round takes it up again (`FINALIZE`s a detach left
     * pending, drops a table left detached).
     */
    drop: (name: string, detaching: boolean) =>
      Effect.gen(function* () {
        yield* exec(
          `ALTER TABLE ${t.logEvent} DETACH PARTITION ${qualified(name)} ${detaching ? "FINALIZE" : "CONCURRENTLY"}`
        )
        yield* exec(`DROP TABLE IF EXISTS ${qualified(name)}`)
        yield* exec(`DELETE FROM ${t.logPartition} WHERE name = $1`, [name])
        return true
      }).pipe(
        Effect.catchTag("SqlError", (error) => {
          // 42P01 / 55000: another round detached or dropped it first, or is detaching it now.
          const state = sqlState(error)
          const collided = state === "42P01" || state === "55000"
          const text = `log retention: ${name} not dropped yet: ${fromSqlError("log.retention")(error).reason}`
          return Effect.as(collided ? Effect.logDebug(text) : Effect.logWarning(text), false)
        })
      ),
    /** Seals of partitions no longer attached (a round that stopped between detach and drop). */
    dropOrphans: Effect.gen(function* () {
      const orphans = yield* exec(
        `SELECT s.name FROM ${t.logPartition} s
          WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                             WHERE i.inhparent = '${t.logEvent}'::regclass AND c.relname = s.name)`
      )
      for (const row of orphans) {
        yield* exec(`DROP TABLE IF EXISTS ${qualified(String(row.name))}`)
        yield* exec(`DELETE FROM ${t.logPartition} WHERE name = $1`, [row.name])
      }
    })
  }
}
