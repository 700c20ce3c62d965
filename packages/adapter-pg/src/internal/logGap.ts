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
 * the gap starts there, less `margin`. It ends `margin` past the slot's creation (the server's
 * clock): anything enqueued later committed after the new slot's start, and the slot gives it.
 */
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import type { LogGap } from "@effect-outbox/core/LogSource"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import type { SqlError } from "effect/sql/SqlError"
import { sqlState } from "./errors.ts"
import type { Exec } from "./logSetup.ts"
import { idFloor } from "./logTable.ts"
import * as Pgoutput from "./pgoutput.ts"

const systemIdentifier = `(SELECT system_identifier::text FROM pg_control_system())`

// Migration 11: the newest published id beside the position, and the mark of a re-created slot
// (its start, and when it was created).
export const gapMigration = (progressTable: string): ReadonlyArray<string> => [
  `ALTER TABLE ${progressTable}
     ADD COLUMN IF NOT EXISTS last_id uuid,
     ADD COLUMN IF NOT EXISTS slot_created pg_lsn,
     ADD COLUMN IF NOT EXISTS slot_created_at timestamptz`
]

/** Marks the gap of the slot `$1` created at `$2`, when this cluster's relay has progress for it. */
export const markSql = (progressTable: string): string =>
  `UPDATE ${progressTable} SET slot_created = $2::pg_lsn, slot_created_at = now()
    WHERE slot = $1 AND system_identifier = ${systemIdentifier}`

/**
 * Marks a slot the setup step just created. No progress table yet (the migrations not run) or no
 * row: the relay never published, there is no gap. A table without the mark's columns is warned.
 */
export const mark = (exec: Exec, progressTable: string, slot: string, start: string): Effect.Effect<void, SqlError> =>
  exec(markSql(progressTable), [slot, start]).pipe(
    Effect.asVoid,
    Effect.catchIf(
      (error) => sqlState(error) === "42P01",
      () => Effect.void
    ),
    // A progress table of an older schema (migrated before the gap mark): no mark can be kept.
    Effect.catchIf(
      (error) => sqlState(error) === "42703",
      () =>
        Effect.logWarning(
          `log setup: slot ${slot} created, but ${progressTable} predates the gap mark: run the outbox migrations (PgLogOutbox.setup) before creating the slot, or republish the gap from the table`
        )
    )
  )

export const gapSql = (progressTable: string): string =>
  `SELECT slot_created::text AS start, last_id::text AS last_id,
          ceil(extract(epoch FROM slot_created_at) * 1000)::float8 AS created FROM ${progressTable}
    WHERE slot = $1 AND system_identifier = ${systemIdentifier} AND slot_created IS NOT NULL`

/**
 * A slot nobody marked (created by hand, not by the setup step) that starts past the relay's own
 * progress: the relay saves every position before it confirms it, so only a slot it did not move
 * can be ahead. Its gap runs to now (its creation time is unknown): what the slot gives again is
 * skipped by id.
 */
export const detectSql = (progressTable: string): string =>
  `SELECT s.confirmed_flush_lsn::text AS start, p.last_id::text AS last_id, p.position::text AS saved,
          ceil(extract(epoch FROM now()) * 1000)::float8 AS created
     FROM ${progressTable} p JOIN pg_replication_slots s ON s.slot_name = p.slot
    WHERE p.slot = $1 AND p.system_identifier = ${systemIdentifier} AND p.slot_created IS NULL
      AND p.position <= pg_current_wal_insert_lsn() AND s.confirmed_flush_lsn > p.position`

/**
 * Clears the mark, unless the slot was created again meanwhile (a newer mark stays), and moves the
 * saved position up to the slot's start: everything before it is on the broker now, so the gap is
 * not found again.
 */
export const closeSql = (progressTable: string): string =>
  `UPDATE ${progressTable} SET slot_created = NULL, position = GREATEST(position, $2::pg_lsn)
    WHERE slot = $1 AND (slot_created = $2::pg_lsn OR slot_created IS NULL)`

/** The epoch millis a UUIDv7 carries. */
export const millisOf = (id: string): number => Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16)

export interface GapRow {
  readonly start: string
  readonly last_id: string | null
  readonly created: number
  /** Set for a gap found without a mark: the relay's saved position. */
  readonly saved?: string | undefined
}

/** The gap of a mark. Without a published id (a record saved before migration 11) the whole table. */
export const gapOf = (row: GapRow, margin: number): LogGap => ({
  start: row.start,
  after: row.last_id,
  from: row.last_id === null ? 0 : Math.max(0, millisOf(row.last_id) - margin),
  to: row.created + margin,
  reason:
    row.saved === undefined
      ? undefined
      : `the slot starts past the relay's own progress ${row.saved} and was not created by the setup step (created by hand, or moved by another reader)`
})

/**
 * A page of the gap by id, then in the order the rows were written: ids order events by their
 * millisecond only (the rest is random), so within a millisecond the older transaction
 * (`age(xmin)`) and then the row's place (`ctid`, insert order within one transaction) come first.
 */
export const pageSql = (logEvent: string): string =>
  `SELECT id, record, ms FROM (
     SELECT id::text AS id, record, left(id::text, 13) AS ms, age(xmin) AS age, ctid::text AS at
       FROM ${logEvent}
      WHERE id >= $1::uuid AND id < $2::uuid AND ($3::uuid IS NULL OR id > $3::uuid)
      ORDER BY id LIMIT $4::int4
   ) page ORDER BY ms, age DESC, at`

/**
 * A full page ends at a millisecond boundary (its last millisecond is left to the next page, which
 * reads it whole), so no millisecond's events are split across pages out of order.
 */
export const readPage = (
  exec: Exec,
  logEvent: string,
  gap: LogGap,
  after: string | undefined,
  limit: number
): Effect.Effect<{ readonly events: ReadonlyArray<LogMessage>; readonly more: boolean }, SqlError> =>
  exec(pageSql(logEvent), [idFloor(Math.floor(gap.from)), idFloor(Math.ceil(gap.to)), after ?? null, limit]).pipe(
    Effect.map((rows: ReadonlyArray<{ id: string; record: Uint8Array; ms: string }>) => {
      const full = rows.length >= limit
      const lastMs = rows[rows.length - 1]?.ms
      const kept = full && rows.some((r) => r.ms !== lastMs) ? rows.filter((r) => r.ms !== lastMs) : rows
      return { events: kept.map((row) => Pgoutput.event(row.id as EventId, row.record)), more: full }
    })
  )
