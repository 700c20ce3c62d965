/**
 * The log engine's explicit setup: the publication of the event table and the replication slot.
 * Nothing on the relay's path creates either: a missing slot is an error that says how to
 * create it, never a silent re-creation that would skip the events committed in between.
 */
import { LogSourceError } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { fromSqlError, sqlState } from "./errors.ts"

export type Exec = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<any>, SqlError>

export const SLOT = /^[a-z0-9_]{1,63}$/

/** The slot (and publication) a hand-built log layer uses when none is named. */
export const DEFAULT_SLOT = "effect_outbox_log"

/** The slot name is also written into SQL text: only this alphabet passes, so nothing needs quoting. */
export const checkSlotName = (slot: string): Effect.Effect<string, LogSourceError> =>
  SLOT.test(slot)
    ? Effect.succeed(slot)
    : Effect.fail(
        new LogSourceError({
          operation: "log.options",
          reason: `slot "${slot}" must be 1-63 of a-z 0-9 _ (a replication slot name)`,
          retriable: false
        })
      )

/** Fails (55000, not retriable) unless the server decodes logical changes. */
export const checkWalLevel = (exec: Exec): Effect.Effect<void, LogSourceError> =>
  exec(`SELECT current_setting('wal_level') AS level`, []).pipe(
    Effect.mapError(logError("log.setup")),
    Effect.flatMap((rows) =>
      rows[0]?.level === "logical"
        ? Effect.void
        : Effect.fail(
            new LogSourceError({
              operation: "log.setup",
              reason: `wal_level is ${String(rows[0]?.level)}: the log engine needs wal_level = logical (a server restart; see docs/log-relay.md)`,
              retriable: false
            })
          )
    )
  )

export const logError =
  (operation: string) =>
  (error: SqlError): LogSourceError => {
    const state = sqlState(error)
    const mapped = fromSqlError(operation)(error)
    // 55000: wal_level below logical, or the slot is in use / gone: retrying will not fix it.
    const reason =
      state === "55000"
        ? `${mapped.reason} (logical decoding needs wal_level = logical and a free slot; see docs/log-relay.md)`
        : state === "42501"
          ? `${mapped.reason} (see docs/log-relay.md, "Roles and grants")`
          : mapped.reason
    return new LogSourceError({ operation, reason, retriable: state !== "55000" && state !== "42501" })
  }

const missing = new WeakSet<LogSourceError>()

/** Whether `error` is {@link slotMissing}'s. */
export const isSlotMissing = (error: LogSourceError): boolean => missing.has(error)

/** `PgLogSource.slotMissing`. */
export const slotMissingTotal = Metric.counter("outbox_log_slot_missing_total", {
  description: "Log relay lease attempts that found no replication slot (nothing is published until it is created)",
  incremental: true
})

/** Counts every try that finds no slot, and says so at ERROR once per episode (every try fails alike). */
export const reportMissing = (slot: string) => {
  let reported = false
  return <A, R>(acquire: Effect.Effect<A, LogSourceError, R>): Effect.Effect<A, LogSourceError, R> =>
    acquire.pipe(
      Effect.tap(() =>
        Effect.sync(() => {
          reported = false
        })
      ),
      Effect.tapError((error) => {
        if (!isSlotMissing(error)) return Effect.void
        const first = !reported
        reported = true
        return Effect.andThen(
          Metric.update(slotMissingTotal, 1),
          first ? Effect.logError(`log source: ${error.reason}`).pipe(Effect.annotateLogs({ slot })) : Effect.void
        )
      })
    )
}

/** The error of a relay that finds no slot: what happened, and the one step that fixes it. */
export const slotMissing = (slot: string, operation = "log.acquire"): LogSourceError => {
  const error = new LogSourceError({
    operation,
    reason:
      `replication slot ${slot} does not exist, and the relay never creates one (events committed while there ` +
      `was none are not in a new slot's WAL). Create it with PgLogSource.ensureSlot({ slot: "${slot}" }) ` +
      `(or PgLogOutbox.setup / PgLogOutbox.layer, which run it): the relay then reads what was committed meanwhile ` +
      `back from the event table and publishes it first (docs/log-relay.md, "A lost slot")`,
    retriable: false
  })
  missing.add(error)
  return error
}

// The publication before the slot: pgoutput looks the publication up in the catalog as of each
// decoded change, so a change committed after the slot but before the publication would fail
// every read of the slot, for good. On a server without wal_level = logical the first statement
// fails and creates nothing. The publication is of the event table alone, inserts only, through
// its root (so new partitions need no ALTER).
const publicationSql = (slot: string, t: Tables) =>
  `DO $$ BEGIN
     IF current_setting('wal_level') <> 'logical' THEN
       RAISE EXCEPTION 'logical decoding requires wal_level >= logical' USING ERRCODE = '55000';
     END IF;
     IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = '${slot}') THEN
       CREATE PUBLICATION ${slot} FOR TABLE ${t.logEvent}
         WITH (publish = 'insert', publish_via_partition_root = true);
     END IF;
   END $$`

/** The first server version whose logical slots can be copied to standbys (`failover`). */
export const FAILOVER_SLOTS_VERSION = 170_000

/**
 * Creates the slot unless it exists. From PostgreSQL 17 the slot is a fail-over slot: a standby
 * with `sync_replication_slots` keeps a copy, so a promoted standby has it. Older servers have no
 * such argument, and their standbys have no slot (docs/log-relay-operations.md, "Fail-over").
 */
export const createSlotSql = (slot: string, serverVersion: number): string =>
  `SELECT (pg_create_logical_replication_slot('${slot}', 'pgoutput'${serverVersion >= FAILOVER_SLOTS_VERSION ? ", false, false, true" : ""})).lsn::text AS lsn
     WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '${slot}')`

/** A publication of that name must publish exactly the event table's inserts. */
const checkPublication = (exec: Exec, slot: string, t: Tables) =>
  exec(
    `SELECT p.pubinsert AND NOT p.pubupdate AND NOT p.pubdelete AND NOT p.pubtruncate AND p.pubviaroot
            AND NOT p.puballtables
            AND (SELECT array_agg(pr.prrelid) FROM pg_publication_rel pr WHERE pr.prpubid = p.oid)
                = ARRAY['${t.logEvent}'::regclass::oid] AS ok
       FROM pg_publication p WHERE p.pubname = $1`,
    [slot]
  ).pipe(
    Effect.mapError(logError("log.ensureSlot")),
    Effect.flatMap((rows) =>
      rows[0]?.ok === true
        ? Effect.void
        : Effect.fail(
            new LogSourceError({
              operation: "log.ensureSlot",
              reason:
                `publication ${slot} exists but does not publish only the inserts of ${t.logEvent} (via its root): ` +
                `drop it, or pick another slot name`,
              retriable: false
            })
          )
    )
  )

/**
 * Creates the publication and the slot when missing; the new slot's start when this call created
 * it. Two processes may run it at once: "already exists" (42710) means the other won.
 */
export const ensure = (exec: Exec, slot: string, t: Tables): Effect.Effect<string | undefined, LogSourceError> => {
  const tolerant = (text: string) =>
    exec(text, []).pipe(
      Effect.catchIf(
        (error) => sqlState(error) === "42710",
        () => Effect.succeed([])
      )
    )
  return tolerant(publicationSql(slot, t)).pipe(
    Effect.andThen(exec(`SELECT current_setting('server_version_num')::int4 AS version`, [])),
    Effect.flatMap((rows) => tolerant(createSlotSql(slot, Number(rows[0]?.version ?? 0)))),
    Effect.map((rows): string | undefined => rows[0]?.lsn),
    Effect.mapError((error) =>
      // The publication names the event table: without the migrations there is none to name.
      sqlState(error) === "3F000" || sqlState(error) === "42P01"
        ? new LogSourceError({
            operation: "log.ensureSlot",
            reason: `${t.logEvent} does not exist: run the outbox migrations before creating the slot (PgLogOutbox.setup does both, in that order)`,
            retriable: false
          })
        : logError("log.ensureSlot")(error)
    ),
    Effect.tap(checkPublication(exec, slot, t))
  )
}

/** Whether the slot exists. */
export const slotExists = (exec: Exec, slot: string): Effect.Effect<boolean, LogSourceError> =>
  exec(`SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1) AS ok`, [slot]).pipe(
    Effect.map((rows) => rows[0]?.ok === true),
    Effect.mapError(logError("log.acquire"))
  )

/**
 * Drops the slot and its publication. A slot still streamed (a relay's walsender that has not
 * exited yet, 55006) is tried again for up to 5 s.
 */
export const drop = (exec: Exec, slot: string): Effect.Effect<void, LogSourceError> =>
  Effect.andThen(
    exec(
      `SELECT count(*)::int AS n FROM (SELECT pg_drop_replication_slot(slot_name)::text FROM pg_replication_slots WHERE slot_name = $1) d`,
      [slot]
    ).pipe(
      Effect.retry({
        while: (error) => sqlState(error) === "55006",
        schedule: Schedule.spaced(Duration.millis(200)),
        times: 25
      })
    ),
    exec(`DROP PUBLICATION IF EXISTS ${slot}`, [])
  ).pipe(Effect.asVoid, Effect.mapError(logError("log.dropSlot")))
