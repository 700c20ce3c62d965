/**
 * The log engine's event table: one row per event (the id, and the event's `LogRecord` bytes),
 * insert only, range-partitioned on the UUIDv7 id, whose first 48 bits are the enqueue's epoch
 * millis, so a partition is a span of time and the id stays the primary key. Retention drops
 * whole partitions (`PgLogRetention`); nothing ever updates or deletes a row.
 *
 * Partitions are named `<prefix>log_<start millis>` and tile time without gaps: each new one
 * starts where the last ends, whatever span it was made with.
 */
import type { Tables } from "../PgTables.ts"

/** The defaults the migration creates the first partitions with (PgLogRetention's defaults). */
export const DEFAULT_SPAN_MS = 60 * 60 * 1000
export const DEFAULT_AHEAD_MS = 24 * 60 * 60 * 1000

/** The lowest id of millisecond `ms`, as a 32-digit hex uuid literal. */
export const idFloor = (ms: number): string => `${ms.toString(16).padStart(12, "0")}${"0".repeat(20)}`

/** The epoch millis at the start of a partition bound as PostgreSQL prints it (`FOR VALUES FROM ('…') TO ('…')`). */
export const boundsOf = (expression: string): { readonly from: number; readonly to: number } | undefined => {
  const match = /FROM \('([0-9a-f]{8})-([0-9a-f]{4})[^)]*\) TO \('([0-9a-f]{8})-([0-9a-f]{4})/.exec(expression)
  if (match === null) return undefined
  return { from: Number.parseInt(match[1]! + match[2]!, 16), to: Number.parseInt(match[3]! + match[4]!, 16) }
}

/**
 * Creates partitions from the end of the last one (or one span before now) until `ahead_ms`
 * past now; returns how many it made. Serialised per outbox by an advisory lock, so two callers
 * never race on a bound. Needs ownership of the event table (the migration's role).
 */
const partitionsFunction = (
  t: Tables
) => `CREATE OR REPLACE FUNCTION ${t.logPartitionsFunction}(span_ms bigint, ahead_ms bigint)
  RETURNS integer LANGUAGE plpgsql AS $log_partitions$
DECLARE
  now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  last_ms bigint;
  start_ms bigint;
  made integer := 0;
BEGIN
  IF span_ms IS NULL OR span_ms < 1000 THEN
    RAISE EXCEPTION 'the log partition span must be at least 1 second, got % ms', span_ms USING ERRCODE = '22023';
  END IF;
  PERFORM pg_advisory_xact_lock(${t.locks.logMaintenance}, 1);
  SELECT max(('x' || m[1] || m[2])::bit(48)::bigint) INTO last_ms
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid,
    LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([0-9a-f]{8})-([0-9a-f]{4})') AS m
   WHERE i.inhparent = '${t.logEvent}'::regclass;
  -- After a long pause, start near now rather than fill the past.
  start_ms := greatest(coalesce(last_ms, 0), now_ms - span_ms - (now_ms % span_ms));
  WHILE start_ms < now_ms + ahead_ms LOOP
    -- Created apart, then attached: ATTACH takes a lock that inserts into the table do not
    -- wait for (CREATE TABLE ... PARTITION OF would take one they queue behind).
    EXECUTE format('CREATE TABLE %I.%I (LIKE ${t.logEvent} INCLUDING ALL)', '${t.schema}', '${t.tablePrefix}log_' || start_ms);
    EXECUTE format('ALTER TABLE ${t.logEvent} ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
      '${t.schema}', '${t.tablePrefix}log_' || start_ms,
      (lpad(to_hex(start_ms), 12, '0') || repeat('0', 20))::uuid,
      (lpad(to_hex(start_ms + span_ms), 12, '0') || repeat('0', 20))::uuid);
    start_ms := start_ms + span_ms;
    made := made + 1;
  END LOOP;
  RETURN made;
END
$log_partitions$`

/** Migration 7's statements. */
export const migration = (t: Tables): ReadonlyArray<string> => {
  const p = t.tablePrefix
  return [
    // No index but the primary key: the relay reads the WAL, not the table; the key keeps an id
    // unique and serves an operator's look-up of one event.
    `CREATE TABLE IF NOT EXISTS ${t.logEvent} (
           id uuid NOT NULL,
           record bytea NOT NULL,
           CONSTRAINT ${p}log_event_pkey PRIMARY KEY (id)
         ) PARTITION BY RANGE (id)`,
    `CREATE TABLE IF NOT EXISTS ${t.logPartition} (
           name text PRIMARY KEY,
           sealed_lsn pg_lsn NOT NULL,
           sealed_at timestamptz NOT NULL DEFAULT now()
         )`,
    partitionsFunction(t),
    `SELECT ${t.logPartitionsFunction}(${DEFAULT_SPAN_MS}, ${DEFAULT_AHEAD_MS})`
  ]
}

/** The writer's statements: one event, or many in one statement. */
export const insertTexts = (t: Tables) => ({
  one: `INSERT INTO ${t.logEvent} (id, record) VALUES ($1::uuid, $2::bytea)`,
  many: `INSERT INTO ${t.logEvent} (id, record) SELECT * FROM unnest($1::uuid[], $2::bytea[])`
})
