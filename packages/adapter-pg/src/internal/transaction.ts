import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * What one transaction opened by `PgTransactor` carries for the calls that join it. Provided
 * for the outermost call only and new for every transaction, so nothing outlives it.
 */
export interface TransactionState {
  /** A joined call failed: its writes cannot be undone alone (no savepoint), so the commit must not happen. */
  failedInside: boolean
  /** `PgWakeUp.notify` already queued its `NOTIFY` in this transaction (`notifyInTransaction`). */
  notified: boolean
  /**
   * The transaction's own level of `SqlClient.transactionService` (the `[connection, 0]` value
   * effect/sql provides inside it), set when the body starts: a call that sees this very value
   * runs at the transaction's outer level, not in a savepoint or another transaction.
   */
  level: unknown
  /**
   * Effects to run once `COMMIT` succeeded (never after a rollback), registered at the outer
   * level with {@link afterCommit}: `SqlClient.afterCommit` without its per-call copy of the
   * fiber's context (two per call), which cost node CPU on every enqueue.
   */
  readonly afterCommit: Array<Effect.Effect<void>>
  /** `COMMIT` or `ROLLBACK` is done: nothing may be registered any more. */
  ended: boolean
}

export const CurrentTransaction = Context.Reference<TransactionState | undefined>(
  "@effect-outbox/adapter-pg/CurrentTransaction",
  { defaultValue: () => undefined }
)

export const makeState = (): TransactionState => ({
  failedInside: false,
  notified: false,
  level: undefined,
  afterCommit: [],
  ended: false
})

/**
 * Runs `effect` once the transaction commits (at once outside a transaction, never after a
 * rollback), as `sql.afterCommit(effect)` does; an effect already registered in the same
 * transaction is not registered twice. `effect` must not need the transaction's services: at
 * the outer level of a `PgTransactor` transaction it runs after the transaction, in the fiber
 * that opened it. Elsewhere (inside a savepoint, in a transaction `PgTransactor` did not open,
 * outside any) this is `sql.afterCommit`.
 */
export const afterCommit = (
  transactionService: SqlClient.SqlClient["transactionService"],
  sqlAfterCommit: (effect: Effect.Effect<void>) => Effect.Effect<void>,
  effect: Effect.Effect<void>
): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    const state = fiber.getRef(CurrentTransaction)
    if (
      state === undefined ||
      state.ended ||
      state.level === undefined ||
      state.level !== Context.getOrUndefined(fiber.context, transactionService)
    ) {
      return sqlAfterCommit(effect)
    }
    if (!state.afterCommit.includes(effect)) state.afterCommit.push(effect)
    return Effect.void
  })

/** Runs the callbacks of a committed transaction: each one's failure is logged, not raised. */
export const runAfterCommit = (state: TransactionState): Effect.Effect<void> =>
  Effect.forEach(
    state.afterCommit,
    (effect) =>
      Effect.ignoreCause(effect, {
        log: "Unhandled",
        message: "Unhandled error in PgTransactor after-commit callback"
      }),
    { discard: true }
  )
