/**
 * The log relay's quarantine table and its one transition function: every status change of a
 * quarantined event (the relay's and the operator's) is an UPDATE through `transition`.
 */
import { canTransition, type QuarantineStatus, unresolved } from "@effect-outbox/core/LogQuarantine"
import { LogSourceError } from "@effect-outbox/core/LogSource"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { fromSqlError } from "./errors.ts"

/** The quarantine table's quoted name, beside the outbox's other tables. */
export const quarantineTable = (t: Tables): string => `"${t.schema}"."${t.tablePrefix}log_quarantine"`

// Migration 9. `seq` is log order (the relay inserts in log order); `payload` the record's bytes
// (the raw entry for an invalid one); `resolved_by` / `resolved_at` the operator who last decided
// on it (retry, skip), and when.
export const quarantineMigration = (t: Tables): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${quarantineTable(t)} (
     seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
     slot text NOT NULL,
     event_id text NOT NULL,
     position pg_lsn NOT NULL,
     topic text NOT NULL,
     key text,
     partition integer,
     headers jsonb NOT NULL,
     payload bytea NOT NULL,
     created_at timestamptz NOT NULL,
     invalid boolean NOT NULL,
     reason text NOT NULL,
     status text NOT NULL CHECK (status IN ('QUARANTINED', 'HELD', 'RETRYING', 'RETRIED', 'SKIPPED')),
     quarantined_at timestamptz NOT NULL DEFAULT now(),
     resolved_by text,
     resolved_at timestamptz,
     UNIQUE (slot, event_id)
   )`,
  `CREATE INDEX IF NOT EXISTS ${t.tablePrefix}log_quarantine_open_idx ON ${quarantineTable(t)} (slot, topic, key, seq)
     WHERE status IN ('QUARANTINED', 'HELD', 'RETRYING')`
]

export const sqlFailed = (operation: string) => (error: SqlError) => {
  const mapped = fromSqlError(operation)(error)
  return new LogSourceError({ operation, reason: mapped.reason, retriable: mapped.retriable })
}

/** Which events a transition moves: by id, or every event of a topic and key. */
export type Target =
  | { readonly _tag: "ids"; readonly ids: ReadonlyArray<string> }
  | { readonly _tag: "key"; readonly topic: string; readonly key: string }

export interface TransitionRequest {
  readonly slot: string
  readonly target: Target
  readonly from: ReadonlyArray<QuarantineStatus>
  readonly to: QuarantineStatus
  /** The operator who decided (recorded as `resolved_by`, with `resolved_at`); none for the relay's moves. */
  readonly by?: string | undefined
  /** A new reason (a refusal again); the old one is kept otherwise. */
  readonly reason?: string | undefined
}

/**
 * The one way a quarantined event changes status: only the moves `canTransition` allows, only
 * from the statuses given (an event that moved meanwhile is left alone), stamped with who and
 * when. Returns the ids moved.
 */
export const transition = (
  sql: SqlClient.SqlClient,
  table: string,
  request: TransitionRequest
): Effect.Effect<ReadonlyArray<string>, LogSourceError> => {
  const illegal = request.from.filter((from) => !canTransition(from, request.to))
  if (illegal.length > 0) {
    return Effect.fail(
      new LogSourceError({
        operation: "log.quarantine.transition",
        reason: `a quarantined event cannot move from ${illegal.join(", ")} to ${request.to}`,
        retriable: false
      })
    )
  }
  if (request.target._tag === "ids" && request.target.ids.length === 0) return Effect.succeed([])
  const where =
    request.target._tag === "ids" ? `event_id = ANY($5::text[])` : `topic = $5 AND key = $6 AND key IS NOT NULL`
  const params =
    request.target._tag === "ids"
      ? [request.slot, request.to, request.by ?? null, request.reason ?? null, request.target.ids, request.from]
      : [request.slot, request.to, request.by ?? null, request.reason ?? null, request.target.topic, request.target.key]
  const from = request.target._tag === "ids" ? "$6" : "$7"
  if (request.target._tag === "key") params.push(request.from)
  return sql
    .unsafe<{ id: string }>(
      `UPDATE ${table} SET status = $2, reason = COALESCE($4, reason),
              resolved_by = COALESCE($3, resolved_by), resolved_at = CASE WHEN $3::text IS NULL THEN resolved_at ELSE now() END
        WHERE slot = $1 AND ${where} AND status = ANY(${from}::text[])
        RETURNING event_id AS id`,
      params as Array<unknown>
    )
    .pipe(
      Effect.map((rows) => rows.map((r) => r.id)),
      Effect.mapError(sqlFailed("log.quarantine.transition"))
    )
}

export const unresolvedList = unresolved.map((s) => `'${s}'`).join(", ")
