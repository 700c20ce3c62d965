/**
 * The statements of the inbox's retention (`PgInboxStore.purge`): create partitions ahead, then
 * forget every partition that ended by the cut-off — the horizon first (from then on its keys
 * are `"expired"`), then the partition detached concurrently (records into the others never
 * wait) and dropped. Never a DELETE.
 */
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { fromSqlError, sqlState } from "./errors.ts"
import { boundsOf } from "./inboxTable.ts"

/** One partition of the processed table. */
export interface Partition {
  readonly name: string
  readonly from: number
  readonly to: number
  /** A concurrent detach began and did not finish. */
  readonly detaching: boolean
}

const quote = (name: string) => `"${name}"`

export const InboxTable = (sql: SqlClient.SqlClient, t: Tables) => {
  const exec = (text: string, params: ReadonlyArray<unknown> = []) =>
    sql.unsafe(text, params as Array<unknown>).withoutTransform as Effect.Effect<
      ReadonlyArray<Record<string, unknown>>,
      SqlError
    >
  const qualified = (name: string) => `${quote(t.schema)}.${quote(name)}`

  const partitions: Effect.Effect<ReadonlyArray<Partition>, SqlError> = exec(
    `SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound, i.inhdetachpending AS detaching
       FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = '${t.processed}'::regclass`
  ).pipe(
    Effect.map((rows) =>
      rows
        .flatMap((row): Array<Partition> => {
          const bounds = boundsOf(String(row.bound))
          return bounds === undefined ? [] : [{ name: String(row.name), ...bounds, detaching: row.detaching === true }]
        })
        .sort((a, b) => a.from - b.from)
    )
  )

  /** Detached without blocking the other partitions' writers, then dropped; answers its rows. */
  const drop = (p: Partition) =>
    Effect.gen(function* () {
      // The horizon rises before the partition goes: a key of it is refused from now on.
      yield* exec(`UPDATE ${t.inboxHorizon} SET remembered_from_ms = greatest(remembered_from_ms, $1::bigint)`, [
        String(p.to)
      ])
      const [counted] = yield* exec(`SELECT count(*)::float8 AS n FROM ${qualified(p.name)}`)
      yield* exec(
        `ALTER TABLE ${t.processed} DETACH PARTITION ${qualified(p.name)} ${p.detaching ? "FINALIZE" : "CONCURRENTLY"}`
      )
      yield* exec(`DROP TABLE IF EXISTS ${qualified(p.name)}`)
      return Number(counted?.n ?? 0)
    }).pipe(
      Effect.catchTag("SqlError", (error) => {
        // 42P01 / 55000: another process's round detached or dropped it first, or is detaching it now.
        const state = sqlState(error)
        const text = `inbox retention: ${p.name} not dropped yet: ${fromSqlError("inbox.purge")(error).reason}`
        return Effect.as(state === "42P01" || state === "55000" ? Effect.logDebug(text) : Effect.logWarning(text), 0)
      })
    )

  return {
    createAhead: (spanMs: number, aheadMs: number) =>
      exec(`SELECT ${t.inboxPartitionsFunction}($1::bigint, $2::bigint) AS made`, [spanMs, aheadMs]).pipe(
        Effect.map((rows) => Number(rows[0]?.made ?? 0))
      ),
    partitions,
    /** Forgets the partitions that ended by `olderThan`, oldest first; answers the records they held. */
    forget: (olderThan: number) =>
      Effect.gen(function* () {
        let forgotten = 0
        for (const p of yield* partitions) {
          if (p.to > olderThan) break
          forgotten += yield* drop(p)
        }
        return forgotten
      }),
    horizon: exec(`SELECT remembered_from_ms::text AS ms FROM ${t.inboxHorizon}`).pipe(
      Effect.map((rows) => fromHorizon(rows[0]?.ms))
    )
  }
}

/** The horizon column as a number: the smallest bigint (nothing forgotten) is `-Infinity`. */
export const fromHorizon = (raw: unknown): number => {
  const ms = Number(raw)
  return Number.isFinite(ms) && ms > -(2 ** 62) ? ms : Number.NEGATIVE_INFINITY
}
