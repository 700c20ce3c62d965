import * as PgTypes from "@effect/sql-pg/PgTypes"
import { StoreError } from "@effect-outbox/core/Errors"
import type { NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { InsertResult } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { Tables } from "../PgTables.ts"
import { fromSqlError } from "./errors.ts"
import { clientSpans, executor } from "./fixedStatement.ts"
import { ts, typedArray } from "./params.ts"

const COLUMNS = "(id, topic, key, partition, headers, payload, status, available_at, created_at, updated_at)"

// One row (the usual enqueue): a plain VALUES list, cheaper to plan than unnest over nine
// arrays (×0.79 of the same row inserted by hand, one client). `updated_at` is
// `created_at` ($9 twice).
const ONE_ROW = "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)"

/** Nine typed arrays ($1–$9), `seq` assigned in the batch's order. */
const UNNEST_ROWS = `SELECT u.id, u.topic, u.key, u.partition, u.headers, u.payload, u.status,
         u.available_at, u.created_at, u.created_at
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::jsonb[], $6::bytea[], $7::text[],
                $8::timestamptz[], $9::timestamptz[])
         WITH ORDINALITY AS u(id, topic, key, partition, headers, payload, status, available_at, created_at, ord)
   ORDER BY u.ord`

const oneRowParams = (one: NewOutboxMessage): Array<unknown> => [
  PgTypes.uuid(one.id),
  PgTypes.text(one.topic),
  PgTypes.text(one.key),
  PgTypes.int4(one.partition),
  PgTypes.jsonb(one.headers),
  one.payload,
  PgTypes.text(one.status),
  ts(one.availableAt),
  ts(one.createdAt)
]

// The nine columns' arrays for unnest, in `UNNEST_ROWS`'s order.
const unnestColumns: ReadonlyArray<readonly [(m: NewOutboxMessage) => unknown, number]> = [
  [(m) => m.id, PgTypes.OID.uuid],
  [(m) => m.topic, PgTypes.OID.text],
  [(m) => m.key, PgTypes.OID.text],
  [(m) => m.partition, PgTypes.OID.int4],
  [(m) => m.headers, PgTypes.OID.jsonb],
  [(m) => m.payload, PgTypes.OID.bytea],
  [(m) => m.status, PgTypes.OID.text],
  [(m) => m.availableAt, PgTypes.OID.timestamptz],
  [(m) => m.createdAt, PgTypes.OID.timestamptz]
]

const unnestParams = (messages: ReadonlyArray<NewOutboxMessage>): Array<unknown> =>
  unnestColumns.map(([field, oid]) => typedArray(messages.map(field), oid))

/**
 * The outbox insert: one statement for the batch. The rows come validated from core
 * (`Outbox.prepare`); what the table itself refuses (an id already there, a CHECK) fails typed.
 * With `notify` (the in-transaction wake-up mode) and a `PENDING` row among them, the same
 * statement queues the wake-up `pg_notify` (delivered on commit, dropped on rollback) and the
 * result says so, so the enqueue does not notify again.
 *
 * It runs once per enqueue, so like `PgInboxStore.record` it sends a fixed statement text
 * (table names are validated identifiers, everything else a bound parameter) straight to the
 * transaction's connection (`SqlClient.transactionService`; prepared once per connection by the
 * driver): no per-call compile of a `sql` template and no effect/sql statement span, which cost
 * node CPU on every business transaction (bench/JOURNAL.md). Outside a
 * transaction it goes through `sql.unsafe`. Its span `pg.outbox.insert` (kind `client`, with
 * `db.query.text`) captures no stack trace (it could only name this file).
 */
export const insert = (sql: SqlClient.SqlClient, t: Tables, notify: boolean) => {
  const target = `INSERT INTO ${t.message} ${COLUMNS}`
  const texts = {
    one: `${target} ${ONE_ROW}`,
    many: `${target} ${UNNEST_ROWS}`,
    // The channel is the next parameter after the rows' ($10 after one row, $10 after nine arrays).
    oneNotify: `WITH inserted AS (${target} ${ONE_ROW} RETURNING 1)
      SELECT pg_notify($10::text, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS one`,
    manyNotify: `WITH inserted AS (${target} ${UNNEST_ROWS} RETURNING 1)
      SELECT pg_notify($10::text, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS one`
  }
  const spanOptions = clientSpans(Object.values(texts))
  const execute = executor(sql)
  return (messages: ReadonlyArray<NewOutboxMessage>): Effect.Effect<InsertResult, StoreError> => {
    if (messages.length === 0) return Effect.succeed({ wakeUpQueued: false })
    const one = messages.length === 1
    const params = one ? oneRowParams(messages[0]!) : unnestParams(messages)
    const wakeUpQueued = notify && messages.some((m) => m.status === "PENDING")
    if (wakeUpQueued) params.push(PgTypes.text(t.channel))
    const text = one ? (wakeUpQueued ? texts.oneNotify : texts.one) : wakeUpQueued ? texts.manyNotify : texts.many
    const result: InsertResult = { wakeUpQueued }
    return Effect.mapBoth(execute(text, params), {
      onSuccess: () => result,
      onFailure: (error) =>
        error.reason._tag === "UniqueViolation"
          ? new StoreError({
              operation: "outbox.insert",
              reason: `an event with one of these ids already exists (${messages.map((m) => m.id).join(", ")})`,
              kind: "permanent",
              cause: error
            })
          : fromSqlError("outbox.insert")(error)
    }).pipe(Effect.withSpan("pg.outbox.insert", spanOptions.get(text), { captureStackTrace: false }))
  }
}
