import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"

/**
 * Runs a fixed statement text with bound parameters for a hot path (one per enqueue, one per
 * consumed message): inside a transaction straight on its connection (`sql.transactionService`,
 * prepared once per connection by the driver), with no per-call compile of a `sql` template and
 * no effect/sql statement span; outside one through `sql.unsafe`. Rows come untransformed.
 */
export const executor =
  (sql: SqlClient.SqlClient) =>
  (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<unknown>, SqlError> =>
    Effect.withFiber((fiber) => {
      const ambient = Context.getOrUndefined(fiber.context, sql.transactionService)
      return ambient === undefined
        ? sql.unsafe(text, params as Array<unknown>).withoutTransform
        : ambient[0].execute(text, params, undefined)
    })

/**
 * The span options of fixed statements, by text: a database client span with the statement's
 * text, standing in for the effect/sql statement span the executor does not make.
 */
export const clientSpans = (texts: ReadonlyArray<string>) =>
  new Map(
    texts.map((text) => [
      text,
      { kind: "client" as const, attributes: { "db.system.name": "postgresql", "db.query.text": text } }
    ])
  )
