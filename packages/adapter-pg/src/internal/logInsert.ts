import * as PgTypes from "@effect/sql-pg/PgTypes"
import { StoreError } from "@effect-outbox/core/Errors"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { fromSqlError, sqlState } from "./errors.ts"
import { clientSpans, executor } from "./fixedStatement.ts"
import * as LogTable from "./logTable.ts"
import { typedArray } from "./params.ts"

/** The two refusals a writer can act on, said in words. */
const explain = (t: Tables, messages: ReadonlyArray<LogRecord.LogMessage>) => (error: SqlError) => {
  const mapped = fromSqlError("log.emit")(error)
  const state = sqlState(error)
  if (state === "23514") {
    return new StoreError({
      operation: "log.emit",
      reason:
        `no partition of ${t.logEvent} holds event ${messages[0]?.id ?? "?"}${messages.length > 1 ? " (or another of the batch)" : ""}: ` +
        "event ids must be UUIDv7 of the current time (Outbox.enqueue makes them), and the partitions ahead are " +
        "created by the migrations and PgLogRetention.maintain, which must run at least once per day (see docs/log-relay.md)",
      kind: "permanent",
      cause: error
    })
  }
  if (state === "42501") {
    return new StoreError({
      operation: "log.emit",
      reason: `${mapped.reason} (the writer's role needs INSERT on ${t.logEvent}; see docs/log-relay.md, "Roles and grants")`,
      kind: "permanent",
      cause: error
    })
  }
  return mapped
}

/**
 * The log engine's write: the events as rows of the event table in the ambient transaction, one
 * fixed statement per call (`fixedStatement.ts`: on the transaction's connection, prepared once
 * per connection, no per-call template compile).
 */
export const inserter = (sql: SqlClient.SqlClient, t: Tables) => {
  const execute = executor(sql)
  const texts = LogTable.insertTexts(t)
  const spanOptions = clientSpans(Object.values(texts))
  return (messages: ReadonlyArray<LogRecord.LogMessage>): Effect.Effect<void, StoreError> => {
    if (messages.length === 0) return Effect.void
    const one = messages.length === 1
    const text = one ? texts.one : texts.many
    const params = one
      ? [messages[0]!.id, LogRecord.encode(messages[0]!)]
      : [
          typedArray(
            messages.map((m) => m.id),
            PgTypes.OID.uuid
          ),
          typedArray(messages.map(LogRecord.encode), PgTypes.OID.bytea)
        ]
    return execute(text, params).pipe(
      Effect.asVoid,
      Effect.mapError(explain(t, messages)),
      Effect.withSpan("pg.log.emit", spanOptions.get(text), { captureStackTrace: false })
    )
  }
}
