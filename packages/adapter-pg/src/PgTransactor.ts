/**
 * The core `Transactor` port over `SqlClient.withTransaction`: the outbox insert, the inbox
 * record and the caller's own SQL share one PostgreSQL transaction.
 *
 * - Nested calls (and calls inside a transaction the caller opened with `sql.withTransaction`)
 *   join the ambient transaction as the port says: no `SAVEPOINT`/`RELEASE` round trips. A joined
 *   call that fails cannot be undone alone, so if the caller recovers from its failure and lets
 *   the outer call succeed, the outer transaction rolls back and fails (nothing half-written
 *   commits). Open a savepoint yourself (`sql.withTransaction` inside) for partial rollback: a
 *   failure inside it is the savepoint's to undo.
 * - `SqlClient.afterCommit` callbacks run once `COMMIT` succeeded, before the outermost call
 *   returns; a rollback runs none. So do the wake-ups `PgWakeUp` registers at the transaction's
 *   outer level: this transactor keeps them itself (`internal/transaction.ts`) and runs them
 *   right after the commit, which spares `SqlClient.afterCommit`'s copies of the fiber's context
 *   on every enqueue.
 *
 * @since 0.1.0
 */
import { StoreError } from "@effect-outbox/core/Errors"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { isSqlError } from "effect/sql/SqlError"
import { fromSqlError } from "./internal/errors.ts"
import { CurrentTransaction, makeState, runAfterCommit, type TransactionState } from "./internal/transaction.ts"

/** Carries the caller's own failure through `withTransaction`, so only BEGIN/COMMIT errors are mapped. */
class Inner<E> {
  readonly error: E
  constructor(error: E) {
    this.error = error
  }
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  // Inside a savepoint the caller opened (depth > 0), a failure is the savepoint's to undo.
  const join = <A, E, R>(effect: Effect.Effect<A, E, R>, state: TransactionState | undefined, depth: number) =>
    state === undefined || depth > 0
      ? effect
      : Effect.onExit(effect, (exit) =>
          Effect.sync(() => {
            if (Exit.isFailure(exit)) state.failedInside = true
          })
        )

  const outermost = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> => {
    const state = makeState()
    const checked = Effect.flatMap(
      Effect.mapError(effect, (error) => new Inner(error)),
      (a) =>
        state.failedInside
          ? Effect.fail(
              new Inner(
                new StoreError({
                  operation: "transaction",
                  reason:
                    "a nested withTransaction failed and the caller went on; nested calls join the outer " +
                    "transaction (no savepoint), so its writes cannot be undone alone and the whole " +
                    "transaction was rolled back. Open a savepoint yourself (sql.withTransaction) to recover inside it",
                  kind: "permanent"
                })
              )
            )
          : Effect.succeed(a)
    )
    const body = Effect.withFiber((fiber) => {
      state.level = Context.getOrUndefined(fiber.context, sql.transactionService)
      return checked
    })
    return sql.withTransaction(Effect.provideService(body, CurrentTransaction, state)).pipe(
      // COMMIT succeeded (or the transaction failed and rolled back): the callbacks registered at
      // the outer level run after a commit only.
      Effect.onExit((exit) => {
        state.ended = true
        return Exit.isSuccess(exit) && state.afterCommit.length > 0 ? runAfterCommit(state) : Effect.void
      }),
      Effect.mapError((error): E | StoreError =>
        error instanceof Inner ? (error.error as E) : fromSqlError("transaction")(error)
      ),
      // effect/sql turns a failed ROLLBACK (and a failed COMMIT whose cleanup failed too) into
      // defects, which would kill the caller's fiber. They mean the connection died mid-
      // transaction: surface the retriable store error the port promises instead (found by
      // the pg_terminate_backend fault test).
      Effect.catchCause((cause): Effect.Effect<never, E | StoreError> => {
        for (const reason of cause.reasons) {
          if (Cause.isDieReason(reason) && isSqlError(reason.defect)) {
            return Effect.fail(fromSqlError("transaction")(reason.defect))
          }
        }
        return Effect.failCause(cause)
      })
    )
  }

  return Transactor.of({
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, R> =>
      Effect.withFiber((fiber) => {
        const ambient = Context.getOrUndefined(fiber.context, sql.transactionService)
        return ambient === undefined ? outermost(effect) : join(effect, fiber.getRef(CurrentTransaction), ambient[1])
      })
  })
})

/**
 * A failed `COMMIT` (serialization failure, deadlock, lost connection) surfaces as a retriable
 * `StoreError` with operation `"transaction"`; the caller's own errors pass through as they are.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Transactor, never, SqlClient.SqlClient> = Layer.effect(Transactor)(make)
