/**
 * The inbox's processed-message records: range-partitioned on the record's time (`event_ms`,
 * `InboxStore.recordTime`: the UUIDv7 event id's time, else the record's), which is part of the
 * key, so the same message always meets its first record in one partition. Retention drops whole
 * partitions (`PgInboxStore.purge`); nothing deletes a row.
 *
 * Partitions are named `<prefix>inbox_<start millis>` and tile time without gaps from
 * `<prefix>inbox_before`, which holds everything older than the first of them (the records of an
 * upgraded inbox, and the events a new consumer reads from far back). `<prefix>inbox_horizon`
 * holds the oldest time still remembered: a record older than it is refused as `"expired"`, in
 * the same statement that records it.
 */
import type { Tables } from "../PgTables.ts"

/** The defaults the migration creates the partitions with (PgInboxStore's defaults). */
export const DEFAULT_SPAN_MS = 24 * 60 * 60 * 1000
export const DEFAULT_AHEAD_MS = 2 * DEFAULT_SPAN_MS

/** The smallest bigint: the horizon of an inbox that has forgotten nothing. */
export const NOTHING_FORGOTTEN = "-9223372036854775808"

/** A partition's bounds as PostgreSQL prints them; `MINVALUE` is `-Infinity`. */
export const boundsOf = (expression: string): { readonly from: number; readonly to: number } | undefined => {
  const match = /FROM \((MINVALUE|'?(-?\d+)'?)\) TO \('?(-?\d+)'?\)/.exec(expression)
  if (match === null) return undefined
  return {
    from: match[1] === "MINVALUE" ? Number.NEGATIVE_INFINITY : Number(match[2]),
    to: Number(match[3])
  }
}

/** The time a UUIDv7 `event:` identity carries, else the processing time (rows of an upgrade). */
const derivedTime = `CASE
  WHEN identity ~ '^event:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$'
    THEN ('x' || lower(substr(identity, 7, 8) || substr(identity, 16, 4)))::bit(48)::bigint
  ELSE floor(extract(epoch FROM processed_at) * 1000)::bigint
END`

/**
 * Creates partitions from the end of the last one until `ahead_ms` past now, without gaps;
 * returns how many it made. Serialised per outbox by an advisory lock.
 */
const partitionsFunction = (
  t: Tables
) => `CREATE OR REPLACE FUNCTION ${t.inboxPartitionsFunction}(span_ms bigint, ahead_ms bigint)
  RETURNS integer LANGUAGE plpgsql AS $inbox_partitions$
DECLARE
  now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  last_ms bigint;
  start_ms bigint;
  made integer := 0;
BEGIN
  IF span_ms IS NULL OR span_ms < 1000 THEN
    RAISE EXCEPTION 'the inbox partition span must be at least 1 second, got % ms', span_ms USING ERRCODE = '22023';
  END IF;
  PERFORM pg_advisory_xact_lock(${t.locks.inboxMaintenance}, 1);
  SELECT max((m[1])::bigint) INTO last_ms
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid,
    LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''?(-?[0-9]+)''?\\)') AS m
   WHERE i.inhparent = '${t.processed}'::regclass;
  -- Every partition dropped: start at the horizon (nothing below it is recorded) or near now.
  start_ms := coalesce(last_ms, greatest((SELECT remembered_from_ms FROM ${t.inboxHorizon}),
                                         now_ms - span_ms - (now_ms % span_ms)));
  WHILE start_ms < now_ms + ahead_ms LOOP
    -- Created apart, then attached: ATTACH takes a lock that inserts do not wait for.
    EXECUTE format('CREATE TABLE %I.%I (LIKE ${t.processed} INCLUDING ALL)', '${t.schema}', '${t.tablePrefix}inbox_' || start_ms);
    EXECUTE format('ALTER TABLE ${t.processed} ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
      '${t.schema}', '${t.tablePrefix}inbox_' || start_ms, start_ms, start_ms + span_ms);
    start_ms := start_ms + span_ms;
    made := made + 1;
  END LOOP;
  RETURN made;
END
$inbox_partitions$`

/**
 * Migration 12's statements: the unpartitioned table of migrations 1-11 becomes
 * `<prefix>inbox_before` and the records it held are copied, each at its time, into the
 * partitioned table (same rows; a UUIDv7 `event:` identity at its event's time, any other at
 * its processing time), before it is dropped.
 */
export const migration = (t: Tables): ReadonlyArray<string> => {
  const p = t.tablePrefix
  const old = `"${t.schema}"."${p}processed_unpartitioned"`
  const spanMs = DEFAULT_SPAN_MS
  return [
    `ALTER TABLE ${t.processed} RENAME TO ${p}processed_unpartitioned`,
    `ALTER TABLE ${old} RENAME CONSTRAINT ${p}processed_pkey TO ${p}processed_unpartitioned_pkey`,
    `DROP INDEX IF EXISTS "${t.schema}".${p}processed_at_idx`,
    // The key includes the time, which the identity determines: one partition holds a message's records.
    `CREATE TABLE ${t.processed} (
           consumer text NOT NULL,
           identity text NOT NULL,
           event_ms bigint NOT NULL,
           processed_at timestamptz NOT NULL,
           CONSTRAINT ${p}processed_pkey PRIMARY KEY (consumer, identity, event_ms)
         ) PARTITION BY RANGE (event_ms)`,
    `CREATE TABLE ${t.inboxHorizon} (
           only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
           remembered_from_ms bigint NOT NULL
         )`,
    `INSERT INTO ${t.inboxHorizon} (remembered_from_ms) VALUES (${NOTHING_FORGOTTEN})`,
    partitionsFunction(t),
    // Everything before the first day partition: since the beginning of time.
    `DO $inbox_before$
     DECLARE
       now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
       first_ms bigint := now_ms - ${spanMs} - (now_ms % ${spanMs});
     BEGIN
       EXECUTE format('CREATE TABLE %I.%I (LIKE ${t.processed} INCLUDING ALL)', '${t.schema}', '${p}inbox_before');
       EXECUTE format('ALTER TABLE ${t.processed} ATTACH PARTITION %I.%I FOR VALUES FROM (MINVALUE) TO (%L)',
         '${t.schema}', '${p}inbox_before', first_ms);
     END
     $inbox_before$`,
    // Partitions ahead, and up to the newest record being copied (a producer's clock may run ahead).
    `SELECT ${t.inboxPartitionsFunction}(${spanMs}, greatest(${DEFAULT_AHEAD_MS},
       coalesce((SELECT max(${derivedTime}) FROM ${old}), 0)
         - floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + ${spanMs}))`,
    `INSERT INTO ${t.processed} (consumer, identity, event_ms, processed_at)
       SELECT consumer, identity, ${derivedTime}, processed_at FROM ${old}`,
    `DROP TABLE ${old}`
  ]
}
