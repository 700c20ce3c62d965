/**
 * The log relay's durable progress on PostgreSQL: one row per slot, in the outbox schema, with the
 * highest commit position whose events the broker acknowledged and the cluster it belongs to.
 */
import type { Tables } from "../PgTables.ts"

/** The progress table's quoted name, beside the outbox's other tables. */
export const progressTable = (t: Tables): string => `"${t.schema}"."${t.tablePrefix}log_progress"`

// Migration 8. `system_identifier` names the cluster whose WAL the position is in: a record from
// another cluster (a restore into a new one) is ignored rather than trusted to skip events.
export const progressMigration = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${progressTable(t)} (
     slot text PRIMARY KEY,
     position pg_lsn NOT NULL,
     system_identifier text NOT NULL,
     updated_at timestamptz NOT NULL
   )`
]

const systemIdentifier = `(SELECT system_identifier::text FROM pg_control_system())`

/**
 * The saved position, or no row when nothing was saved or the record is another cluster's (or
 * ahead of this server's WAL, which only a different history can be).
 */
export const readSql = (table: string): string =>
  `SELECT position::text AS position FROM ${table}
    WHERE slot = $1 AND system_identifier = ${systemIdentifier} AND position <= pg_current_wal_insert_lsn()`

/**
 * One round trip, without waiting for the WAL flush (`synchronous_commit` off for this statement's
 * transaction only): a flush per window would cost the relay a disk sync on its path (2-4 ms
 * measured, against 0.2 ms). A crash may lose the last fraction of a second of saves; the relay
 * then probes the windows past the older position until one is not on the broker, so that costs
 * probes, not duplicates. `$3` is the window's newest event id (null for none), where a
 * re-created slot's gap starts (internal/logGap.ts). Never moves back, so a late save from a
 * relay that lost the lease cannot undo a newer one.
 */
export const saveSql = (table: string): string =>
  `INSERT INTO ${table} AS p (slot, position, last_id, system_identifier, updated_at)
   SELECT $1, $2::pg_lsn, $3::uuid, ${systemIdentifier}, now() FROM (SELECT set_config('synchronous_commit', 'off', true)) quick
   ON CONFLICT (slot) DO UPDATE SET
     position = CASE WHEN p.system_identifier = EXCLUDED.system_identifier
                     THEN GREATEST(p.position, EXCLUDED.position) ELSE EXCLUDED.position END,
     last_id = CASE WHEN p.system_identifier = EXCLUDED.system_identifier
                    THEN GREATEST(p.last_id, EXCLUDED.last_id) ELSE EXCLUDED.last_id END,
     ${clearPart},
     system_identifier = EXCLUDED.system_identifier,
     updated_at = now()`

// Migration 13: a transaction relayed in parts, by its commit position, and how many of its
// events are on the broker.
export const partMigration = (t: Tables): ReadonlyArray<string> => [
  `ALTER TABLE ${progressTable(t)} ADD COLUMN IF NOT EXISTS part_commit pg_lsn, ADD COLUMN IF NOT EXISTS part_done int8`
]

// A position saved past a part's commit saves its transaction whole (no transaction ends between
// its commit and its end): the part is done with.
const partDone = `p.system_identifier <> EXCLUDED.system_identifier OR p.part_commit < EXCLUDED.position`
const clearPart = `part_commit = CASE WHEN ${partDone} THEN NULL ELSE p.part_commit END,
     part_done = CASE WHEN ${partDone} THEN NULL ELSE p.part_done END`

/** The saved part, when its transaction was not saved whole since, of this cluster. */
export const readPartSql = (table: string): string =>
  `SELECT part_commit::text AS commit, part_done::float8 AS done FROM ${table}
    WHERE slot = $1 AND system_identifier = ${systemIdentifier} AND part_commit IS NOT NULL
      AND part_commit <= pg_current_wal_insert_lsn()`

/**
 * Saves that the first `$3` events of the transaction that commits at `$2` are on the broker,
 * durably (a flush: parts are few and large, and a save lost in a server crash would only mean
 * probing that part again). Every transaction before it is on the broker too (parts come only
 * once all of them are confirmed), so the position moves up to its commit. `$4`: the part's
 * newest id.
 */
export const savePartSql = (table: string): string =>
  `INSERT INTO ${table} AS p (slot, position, last_id, part_commit, part_done, system_identifier, updated_at)
   VALUES ($1, $2::pg_lsn, $4::uuid, $2::pg_lsn, $3::int8, ${systemIdentifier}, now())
   ON CONFLICT (slot) DO UPDATE SET
     position = CASE WHEN p.system_identifier = EXCLUDED.system_identifier
                     THEN GREATEST(p.position, EXCLUDED.position) ELSE EXCLUDED.position END,
     last_id = CASE WHEN p.system_identifier = EXCLUDED.system_identifier
                    THEN GREATEST(p.last_id, EXCLUDED.last_id) ELSE EXCLUDED.last_id END,
     part_done = CASE WHEN p.system_identifier = EXCLUDED.system_identifier AND p.part_commit = EXCLUDED.part_commit
                      THEN GREATEST(p.part_done, EXCLUDED.part_done) ELSE EXCLUDED.part_done END,
     part_commit = EXCLUDED.part_commit,
     system_identifier = EXCLUDED.system_identifier,
     updated_at = now()`

/** Parses an LSN (`X/Y`, hex halves) into one comparable number. */
export const lsn = (text: string): bigint => {
  const slash = text.indexOf("/")
  if (slash < 0) throw new RangeError(`"${text}" is not a PostgreSQL LSN (X/Y in hex)`)
  return (BigInt(`0x${text.slice(0, slash)}`) << 32n) | BigInt(`0x${text.slice(slash + 1)}`)
}

export const compareLsn = (a: string, b: string): number => {
  const x = lsn(a)
  const y = lsn(b)
  return x < y ? -1 : x > y ? 1 : 0
}
