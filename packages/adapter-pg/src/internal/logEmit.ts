import * as PgTypes from "@effect/sql-pg/PgTypes"
import type { OutboxStoreError } from "@effect-outbox/core/Errors"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import { fromSqlError } from "./errors.ts"
import { clientSpans, executor } from "./fixedStatement.ts"
import { typedArray } from "./params.ts"

const texts = {
  // The common case, one event per transaction: a plain call, no array to encode and unnest.
  one: `SELECT pg_logical_emit_message(true, $1::text, $2::bytea) IS NOT NULL AS n`,
  many: `SELECT count(pg_logical_emit_message(true, $1::text, c)) AS n FROM unnest($2::bytea[]) AS c`
}

const spanOptions = clientSpans(Object.values(texts))

/**
 * The log engine's write: the events as transactional logical messages (`prefix`) in the ambient
 * transaction, one fixed statement per call (`fixedStatement.ts`: on the transaction's connection,
 * prepared once per connection, no per-call template compile). An event is a statement's worth
 * of node CPU on the write path, measured by (`bench/src/experiments/WriteCost.ts`).
 */
export const emitter = (sql: SqlClient.SqlClient, prefix: string) => {
  const execute = executor(sql)
  const prefixParam = PgTypes.text(prefix)
  return (messages: ReadonlyArray<LogRecord.LogMessage>): Effect.Effect<void, OutboxStoreError> => {
    if (messages.length === 0) return Effect.void
    const one = messages.length === 1
    const text = one ? texts.one : texts.many
    const events = one ? LogRecord.encode(messages[0]!) : typedArray(messages.map(LogRecord.encode), PgTypes.OID.bytea)
    return execute(text, [prefixParam, events]).pipe(
      Effect.asVoid,
      Effect.mapError(fromSqlError("log.emit")),
      Effect.withSpan("pg.log.emit", spanOptions.get(text), { captureStackTrace: false })
    )
  }
}
