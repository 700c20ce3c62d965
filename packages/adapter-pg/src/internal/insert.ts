import * as PgTypes from "@effect/sql-pg/PgTypes"
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { InsertResult } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { Tables } from "../PgTables.ts"
import { fromSqlError } from "./errors.ts"
import { ts, typedArray } from "./params.ts"

/** Nine typed arrays, `seq` assigned in the batch's order. */
const unnestRows = (sql: SqlClient.SqlClient, messages: ReadonlyArray<NewOutboxMessage>) =>
  sql`SELECT u.id, u.topic, u.key, u.partition, u.headers, u.payload, u.status,
                    u.available_at, u.created_at, u.created_at
               FROM unnest(
                 ${typedArray(
                   messages.map((m) => m.id),
                   PgTypes.OID.uuid
                 )}::uuid[],
                 ${typedArray(
                   messages.map((m) => m.topic),
                   PgTypes.OID.text
                 )}::text[],
                 ${typedArray(
                   messages.map((m) => m.key),
                   PgTypes.OID.text
                 )}::text[],
                 ${typedArray(
                   messages.map((m) => m.partition),
                   PgTypes.OID.int4
                 )}::int4[],
                 ${typedArray(
                   messages.map((m) => m.headers),
                   PgTypes.OID.jsonb
                 )}::jsonb[],
                 ${typedArray(
                   messages.map((m) => m.payload),
                   PgTypes.OID.bytea
                 )}::bytea[],
                 ${typedArray(
                   messages.map((m) => m.status),
                   PgTypes.OID.text
                 )}::text[],
                 ${typedArray(
                   messages.map((m) => m.availableAt),
                   PgTypes.OID.timestamptz
                 )}::timestamptz[],
                 ${typedArray(
                   messages.map((m) => m.createdAt),
                   PgTypes.OID.timestamptz
                 )}::timestamptz[]
               ) WITH ORDINALITY AS u(id, topic, key, partition, headers, payload, status,
                                      available_at, created_at, ord)
              ORDER BY u.ord`

// One row (the usual enqueue): a plain VALUES list, cheaper to plan than unnest over nine
// arrays (issue #14: ×0.79 of the same row inserted by hand, one client).
const oneRow = (sql: SqlClient.SqlClient, one: NewOutboxMessage) =>
  sql`VALUES (${PgTypes.uuid(one.id)}, ${PgTypes.text(one.topic)}, ${PgTypes.text(one.key)}, ${PgTypes.int4(
    one.partition
  )}, ${PgTypes.jsonb(one.headers)}, ${one.payload}, ${PgTypes.text(one.status)}, ${ts(one.availableAt)}, ${ts(
    one.createdAt
  )}, ${ts(one.createdAt)})`

/**
 * The outbox insert: one statement for the batch. The rows come validated from core
 * (`Outbox.prepare`); what the table itself refuses (an id already there, a CHECK) fails typed.
 * With `notify` (the in-transaction wake-up mode) and a `PENDING` row among them, the same
 * statement queues the wake-up `pg_notify` (delivered on commit, dropped on rollback) and the
 * result says so, so the enqueue does not notify again.
 */
export const insert =
  (sql: SqlClient.SqlClient, t: Tables, notify: boolean) =>
  (messages: ReadonlyArray<NewOutboxMessage>): Effect.Effect<InsertResult, OutboxStoreError> => {
    if (messages.length === 0) return Effect.succeed({ wakeUpQueued: false })
    const rows = messages.length === 1 ? oneRow(sql, messages[0]!) : unnestRows(sql, messages)
    const target = sql`INSERT INTO ${sql.literal(t.message)}
      (id, topic, key, partition, headers, payload, status, available_at, created_at, updated_at)`
    const wakeUpQueued = notify && messages.some((m) => m.status === "PENDING")
    const statement = wakeUpQueued
      ? sql`WITH inserted AS (${target} ${rows} RETURNING 1)
            SELECT pg_notify(${t.channel}::text, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS one`
      : sql`${target} ${rows}`
    return statement.withoutTransform.pipe(
      Effect.as({ wakeUpQueued }),
      Effect.mapError((error) =>
        error.reason._tag === "UniqueViolation"
          ? new OutboxStoreError({
              operation: "outbox.insert",
              reason: `an event with one of these ids already exists (${messages.map((m) => m.id).join(", ")})`,
              retriable: false,
              cause: error
            })
          : fromSqlError("outbox.insert")(error)
      ),
      Effect.withSpan("pg.outbox.insert")
    )
  }
