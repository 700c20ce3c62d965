import * as Context from "effect/Context"

/**
 * What one transaction opened by `PgTransactor` carries for the calls that join it. Provided
 * for the outermost call only and new for every transaction, so nothing outlives it. The
 * wake-ups after commit use `SqlClient.afterCommit` instead, which works in any transaction.
 */
export interface TransactionState {
  /** A joined call failed: its writes cannot be undone alone (no savepoint), so the commit must not happen. */
  failedInside: boolean
  /** `PgWakeUp.notify` already queued its `NOTIFY` in this transaction (`notifyInTransaction`). */
  notified: boolean
}

export const CurrentTransaction = Context.Reference<TransactionState | undefined>(
  "@effect-outbox/adapter-pg/CurrentTransaction",
  { defaultValue: () => undefined }
)

export const makeState = (): TransactionState => ({ failedInside: false, notified: false })
