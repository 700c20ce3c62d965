/**
 * The outbox schema, applied with `effect/sql/Migrator`: idempotent, safe to run from several
 * processes at once, in the schema and with the table prefix of {@link PgTables}.
 *
 * @since 0.1.0
 */
import { StoreError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import { claimFunctionV3, claimFunctionV4 } from "./internal/claim.ts"
import { claimedPayloadMigration } from "./internal/claimedPayload.ts"
import { claimFunctionV2 } from "./internal/claimV2.ts"
import { claimFunctionV5 } from "./internal/claimV5.ts"
import { claimFunctionV6 } from "./internal/claimV6.ts"
import { claimFunctionV7 } from "./internal/claimV7.ts"
import { fromSqlError } from "./internal/errors.ts"
import * as InboxTable from "./internal/inboxTable.ts"
import { gapMigration } from "./internal/logGap.ts"
import { partMigration, progressMigration, progressTable } from "./internal/logProgress.ts"
import { quarantineMigration } from "./internal/logQuarantine.ts"
import * as LogTable from "./internal/logTable.ts"
import { notQueued, statusList, statusListV1 } from "./internal/statuses.ts"
import { waitingKeyMigration } from "./internal/waitingKey.ts"
import { PgTables, type Tables } from "./PgTables.ts"

const q = (identifier: string) => `"${identifier}"`

const statements = (sql: SqlClient.SqlClient, list: ReadonlyArray<string>) =>
  Effect.forEach(list, (statement) => sql.unsafe(statement).unprepared, { discard: true })

// Each migration's statements, frozen once published (the text is pinned by test/PgMigrations.test.ts).

// The tables and the indexes of the first claim.
const tables = (t: Tables): ReadonlyArray<string> => {
  const p = t.tablePrefix
  const statuses = statusListV1.map((s) => `'${s}'`).join(", ")
  return [
    `CREATE TABLE IF NOT EXISTS ${t.message} (
           id uuid PRIMARY KEY,
           seq bigint GENERATED ALWAYS AS IDENTITY,
           topic text NOT NULL CHECK (topic <> ''),
           key text,
           partition integer CHECK (partition >= 0),
           headers jsonb NOT NULL DEFAULT '{}'::jsonb,
           payload bytea NOT NULL,
           status text NOT NULL CHECK (status IN (${statuses})),
           attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
           available_at timestamptz NOT NULL,
           lease_owner text,
           lease_expires_at timestamptz,
           published_partition integer,
           published_offset bigint,
           last_error text,
           created_at timestamptz NOT NULL,
           updated_at timestamptz NOT NULL,
           published_at timestamptz,
           processed_at timestamptz
         )`,
    // The claim's candidate scan, in availability order; rows backing off are never read.
    `CREATE INDEX IF NOT EXISTS ${p}message_pending_idx ON ${t.message} (available_at, seq)
           WHERE status = 'PENDING'`,
    // A key's claimable prefix, read in seq order and cut at maxPerKey.
    `CREATE INDEX IF NOT EXISTS ${p}message_pending_key_idx ON ${t.message} (key, seq)
           WHERE status = 'PENDING' AND key IS NOT NULL`,
    // "Is this key in flight?": tiny, only rows being dispatched.
    `CREATE INDEX IF NOT EXISTS ${p}message_dispatching_key_idx ON ${t.message} (key)
           WHERE status = 'DISPATCHING' AND key IS NOT NULL`,
    // Stale-lease recovery, oldest lease first.
    `CREATE INDEX IF NOT EXISTS ${p}message_lease_idx ON ${t.message} (lease_expires_at)
           WHERE status = 'DISPATCHING'`,
    // Retention (status + age), stats and operator listings by status.
    `CREATE INDEX IF NOT EXISTS ${p}message_status_updated_idx ON ${t.message} (status, updated_at)`,
    `CREATE TABLE IF NOT EXISTS ${t.processed} (
           consumer text NOT NULL,
           identity text NOT NULL,
           processed_at timestamptz NOT NULL,
           CONSTRAINT ${p}processed_pkey PRIMARY KEY (consumer, identity)
         )`,
    `CREATE INDEX IF NOT EXISTS ${p}processed_at_idx ON ${t.processed} (processed_at)`,
    `CREATE TABLE IF NOT EXISTS ${t.partitionAssignment} (
           topic text NOT NULL,
           owner_id text NOT NULL,
           partition integer NOT NULL CHECK (partition >= 0),
           created_at timestamptz NOT NULL DEFAULT now(),
           CONSTRAINT ${p}partition_assignment_pkey PRIMARY KEY (topic, owner_id)
         )`,
    `CREATE INDEX IF NOT EXISTS ${p}partition_assignment_partition_idx
           ON ${t.partitionAssignment} (topic, partition)`,
    `CREATE TABLE IF NOT EXISTS ${t.transition} (
           id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
           event_id uuid NOT NULL,
           from_status text NOT NULL,
           to_status text NOT NULL,
           lease_owner text,
           at timestamptz NOT NULL
         )`,
    `CREATE INDEX IF NOT EXISTS ${p}transition_event_idx ON ${t.transition} (event_id, id)`
  ]
}

// Fewer index entries per insert and per status change, a cheaper claim, and autovacuum
// settings for a queue table (measured in docs/postgres.md). Upgrades a populated
// table in place: CREATE INDEX (not CONCURRENTLY: the migration is one transaction) blocks
// writers of the table while it builds, which takes seconds per million rows.
const hotPath = (t: Tables): ReadonlyArray<string> => {
  const p = t.tablePrefix
  return [
    // One index for every DISPATCHING question ("is this key in flight?", stale leases),
    // replacing dispatching_key_idx + lease_idx: a claim writes one entry per row, not two.
    `CREATE INDEX IF NOT EXISTS ${p}message_dispatching_idx ON ${t.message} (key)
           WHERE status = 'DISPATCHING'`,
    `DROP INDEX IF EXISTS ${q(t.schema)}.${q(`${p}message_dispatching_key_idx`)}`,
    `DROP INDEX IF EXISTS ${q(t.schema)}.${q(`${p}message_lease_idx`)}`,
    // Retention, stats and operator listings by status, for every status but the relay's
    // two: inserts (PENDING) and claims (DISPATCHING) no longer write an entry here; those
    // two are counted through their own partial indexes.
    `CREATE INDEX IF NOT EXISTS ${p}message_status_idx ON ${t.message} (status, updated_at)
           WHERE ${notQueued("status")}`,
    `DROP INDEX IF EXISTS ${q(t.schema)}.${q(`${p}message_status_updated_idx`)}`,
    // A queue table: every event leaves three row versions behind. Vacuum it after a fixed
    // number of dead rows (not a fraction of a table that is mostly dead), without throttling.
    `ALTER TABLE ${t.message} SET (
           autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
           autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000,
           autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 5000,
           autovacuum_vacuum_cost_delay = 0)`,
    claimFunctionV3(t)
  ]
}

// A FAILURE row blocks its key's younger rows (unless the relay says
// failedHead "skip"), the operator's SKIPPED status, and the lease expiry from the database
// clock. The claim function gets a new signature, so the old one is dropped: a relay of
// an older version fails loudly instead of claiming past a FAILURE head.
const failureBlocksKey = (t: Tables): ReadonlyArray<string> => {
  const p = t.tablePrefix
  return [
    // Migration 1's CHECK is a column constraint named by PostgreSQL; find and replace it.
    `DO $replace$
         DECLARE c record;
         BEGIN
           FOR c IN SELECT conname FROM pg_constraint
                     WHERE conrelid = '${t.message}'::regclass AND contype = 'c'
                       AND pg_get_constraintdef(oid) LIKE '%status%' LOOP
             EXECUTE format('ALTER TABLE ${t.message} DROP CONSTRAINT %I', c.conname);
           END LOOP;
         END
         $replace$`,
    `ALTER TABLE ${t.message} ADD CONSTRAINT ${p}message_status_check
           CHECK (status IN (${statusList.map((s) => `'${s}'`).join(", ")}))`,
    // "Does this key have a FAILURE row before its head?": tiny, only FAILURE rows.
    `CREATE INDEX IF NOT EXISTS ${p}message_failure_key_idx ON ${t.message} (key, seq)
           WHERE status = 'FAILURE' AND key IS NOT NULL`,
    `DROP FUNCTION IF EXISTS ${t.claimFunction}(text, integer, integer, timestamptz, timestamptz)`,
    claimFunctionV4(t)
  ]
}

// Stale recovery that converges: one recoverer at a time per outbox,
// through a named lease whose expiry the database clock judges.
const staleRecovery = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.lease} (
           name text PRIMARY KEY,
           owner text NOT NULL,
           expires_at timestamptz NOT NULL
         )`
]

// Durable parking: positions only, never payloads.
const parked = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.parked} (
           consumer text NOT NULL,
           topic text NOT NULL,
           partition integer NOT NULL,
           record_offset bigint NOT NULL,
           key text NOT NULL,
           parked_at timestamptz NOT NULL DEFAULT now(),
           PRIMARY KEY (consumer, topic, partition, record_offset)
         )`,
  `CREATE TABLE IF NOT EXISTS ${t.parkedRelease} (
           consumer text NOT NULL,
           topic text NOT NULL,
           partition integer NOT NULL,
           key text NOT NULL,
           requested_at timestamptz NOT NULL DEFAULT now(),
           PRIMARY KEY (consumer, topic, partition, key)
         )`
]

// The consumer group that drives each topic's outbox lifecycle, one per topic, shared by every
// process on this outbox (the runtime refuses a second driving group at start).
const lifecycleGroup = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.lifecycleGroup} (
           topic text PRIMARY KEY,
           group_id text NOT NULL CHECK (group_id <> ''),
           registered_at timestamptz NOT NULL DEFAULT now(),
           started_at timestamptz NOT NULL DEFAULT now()
         )`
]

/**
 * The migrations, numbered. Never edit a published one: add the next number.
 *
 * @since 0.1.0
 * @category migrations
 */
export const migrations = (t: Tables): Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> => {
  const run = (list: ReadonlyArray<string>) => Effect.flatMap(SqlClient.SqlClient, (sql) => statements(sql, list))
  return {
    "1_tables": run(tables(t)),
    "2_claim_function": run([claimFunctionV2(t)]),
    "3_hot_path": run(hotPath(t)),
    "4_failure_blocks_key": run(failureBlocksKey(t)),
    "5_stale_recovery": run(staleRecovery(t)),
    "6_parked": run(parked(t)),
    "7_lifecycle_group": run(lifecycleGroup(t)),
    // The log engine's insert-only event table, partitioned by time, and its first partitions.
    "8_log_events": run(LogTable.migration(t)),
    "9_log_progress": run(progressMigration(t)),
    "10_log_quarantine": run(quarantineMigration(t)),
    // The newest published event id and the mark of a re-created slot (its gap is read back).
    "11_log_gap": run(gapMigration(progressTable(t))),
    // The inbox's records partitioned by time (retention drops partitions) and its horizon.
    "12_inbox_partitions": run(InboxTable.migration(t)),
    // A transaction relayed in parts: its commit position and the events of it on the broker.
    "13_log_part": run(partMigration(t)),
    // The claim check's payloads stored aside, deleted with their event.
    "14_claimed_payload": run(claimedPayloadMigration(t)),
    // The claim's candidate scan reads the oldest rows first, and further only while slots are left.
    "15_claim_first_rows": run([claimFunctionV5(t)]),
    // The claim's probes run only for the candidates it reaches, and its scan reads on, window
    // after window, past the rows of keys whose head waits (and moves them behind it).
    "16_claim_windows": run([claimFunctionV6(t)]),
    // A waiting key's younger rows set aside once (not moved on every back-off round of its
    // head), recorded per key, and brought back by the claim when the head has gone.
    "17_waiting_keys": run([...waitingKeyMigration(t), claimFunctionV7(t)])
  }
}

/**
 * Creates the schema when missing (saying so at WARN, with its name) and applies every pending
 * migration, in one transaction serialised by an advisory lock, so concurrent starts neither race
 * nor half-apply. Returns the
 * migrations it applied (empty when the schema was up to date).
 *
 * @since 0.1.0
 * @category running
 */
export const run: Effect.Effect<
  ReadonlyArray<readonly [id: number, name: string]>,
  StoreError,
  SqlClient.SqlClient | PgTables
> = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const t = yield* PgTables
  return yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(${t.locks.migrations}, 0)`.withoutTransform
      const [found] = yield* sql<{ present: boolean; db: string }>`SELECT current_database() AS db,
        EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ${t.schema}) AS present`.withoutTransform
      if (found !== undefined && !found.present) {
        // Loud on purpose: a mistyped OUTBOX_SCHEMA would otherwise start a second, empty outbox.
        yield* Effect.logWarning(
          `creating the outbox schema "${t.schema}" in database ${found.db}: it does not exist yet ` +
            `(expected on a first deployment; if the name is a typo, stop and fix OUTBOX_SCHEMA)`
        )
      }
      yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS "${t.schema}"`).unprepared
      return yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations(t)), table: t.migrations })
    })
  )
}).pipe(
  Effect.catchTag("SqlError", (error) => Effect.fail(fromSqlError("migrate")(error))),
  Effect.catchTag("MigrationError", (error) =>
    Effect.fail(
      new StoreError({
        operation: "migrate",
        reason: `${error.kind}: ${error.message}`,
        // Another process holds the migration lock: this one may run once it is released.
        kind: error.kind === "Locked" ? "transient" : "permanent",
        cause: error
      })
    )
  ),
  Effect.withSpan("PgOutbox.migrate")
)

/**
 * Runs {@link run} when the layer is built: add it to an application's layer graph and the
 * tables exist before anything uses them.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, StoreError, SqlClient.SqlClient | PgTables> = Layer.effectDiscard(run)
