/**
 * The claim check's table: payloads stored aside, one row per event, deleted with the event's
 * outbox row (the foreign key cascades, so retention's purge removes them). The key is checked at
 * commit: the payload is written before its event row, in the same transaction.
 */
import type { Tables } from "../PgTables.ts"

/** The table's quoted, schema-qualified name (`<schema>.<prefix>claimed_payload`). */
export const claimedPayloadTable = (t: Tables): string => `"${t.schema}"."${t.tablePrefix}claimed_payload"`

export const claimedPayloadMigration = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${claimedPayloadTable(t)} (
     event_id uuid PRIMARY KEY REFERENCES ${t.message} (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
     payload bytea NOT NULL,
     created_at timestamptz NOT NULL DEFAULT now()
   )`
]
