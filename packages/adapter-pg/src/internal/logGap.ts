/**
 * The gap of a re-created slot, on PostgreSQL. A new slot starts at the current end of the WAL:
 * the events committed between the relay's last published one and that start are in the event
 * table only. The setup step (`ensureSlot`), when it creates the slot of an outbox whose relay
 * has progress, marks the progress row with the new slot's start; the relay's next lease reads
 * that mark, publishes the gap from the table and clears it.
 *
 * Rows carry no commit position, so the gap is found by time: event ids are UUIDv7, their first
 * 48 bits the enqueue's epoch millis. An event committed after the newest published one was
 * enqueued at most a transaction's length (and the writers' clock skew) before that one's id:
 * the gap starts there, less `margin`. It ends `margin` past the relay's clock when it reads the
 * mark: anything enqueued later committed after the new slot's start, and the slot gives it.
 */
import type { LogGap } from "@effect-outbox/core/LogSource"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import { sqlState } from "./errors.ts"
import type { Exec } from "./logSetup.ts"

const systemIdentifier = `(SELECT system_identifier::text FROM pg_control_system())`

// Migration 11: the newest published id beside the position, and the mark of a re-created slot.
export const gapMigration = (progressTable: string): ReadonlyArray<string> => [
  `ALTER TABLE ${progressTable} ADD COLUMN IF NOT EXISTS last_id uuid, ADD COLUMN IF NOT EXISTS slot_created pg_lsn`
]

/** Marks the gap of the slot `$1` created at `$2`, when this cluster's relay has progress for it. */
export const markSql = (progressTable: string): string =>
  `UPDATE ${progressTable} SET slot_created = $2::pg_lsn WHERE slot = $1 AND system_identifier = ${systemIdentifier}`

/**
 * Marks a slot the setup step just created. No progress table yet (the migrations not run) or no
 * row: the relay never published, there is no gap.
 */
export const mark = (exec: Exec, progressTable: string, slot: string, start: string): Effect.Effect<void, SqlError> =>
  exec(markSql(progressTable), [slot, start]).pipe(
    Effect.asVoid,
    Effect.catchIf(
      (error) => sqlState(error) === "42P01",
      () => Effect.void
    )
  )

export const gapSql = (progressTable: string): string =>
  `SELECT slot_created::text AS start, last_id::text AS last_id FROM ${progressTable}
    WHERE slot = $1 AND system_identifier = ${systemIdentifier} AND slot_created IS NOT NULL`

/** Clears the mark, unless the slot was created again meanwhile (a newer mark stays). */
export const closeSql = (progressTable: string): string =>
  `UPDATE ${progressTable} SET slot_created = NULL WHERE slot = $1 AND slot_created = $2::pg_lsn`

/** The epoch millis a UUIDv7 carries. */
export const millisOf = (id: string): number => Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16)

/** The gap of a mark read at `now`. Without a published id (never saved one) the whole table. */
export const gapOf = (
  row: { readonly start: string; readonly last_id: string | null },
  now: number,
  margin: number
): LogGap => ({
  start: row.start,
  after: row.last_id,
  from: row.last_id === null ? 0 : Math.max(0, millisOf(row.last_id) - margin),
  to: now + margin
})
