import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * Transaction levels (the `[connection, depth]` value `SqlClient.withTransaction` provides, new
 * for every transaction and savepoint) that already queued a wake-up `NOTIFY`. PostgreSQL would
 * fold a second identical one anyway; remembering it saves the round trip. Keyed by level, so a
 * notification queued in a savepoint that later rolls back does not suppress a later one.
 */
const notified = new WeakSet<object>()

/** The current transaction level, when inside `withTransaction`. */
export const currentLevel = (sql: SqlClient.SqlClient): Effect.Effect<Option.Option<object>> =>
  Effect.map(Effect.serviceOption(sql.transactionService), Option.map((level) => level as unknown as object))

export const markNotified = (level: Option.Option<object>): void => {
  if (Option.isSome(level)) notified.add(level.value)
}

export const alreadyNotified = (level: Option.Option<object>): boolean =>
  Option.isSome(level) && notified.has(level.value)
