/**
 * The core `Transactor` port over `SqlClient.withTransaction`: the outbox insert, the inbox
 * record and the caller's own SQL share one PostgreSQL transaction. Nested calls become
 * savepoints of the outer transaction.
 *
 * @since 0.1.0
 */
import type { OutboxStoreError } from "@effect-outbox/core/Errors"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { isSqlError } from "effect/sql/SqlError"
import { fromSqlError } from "./internal/errors.ts"

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
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return Transactor.of({
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | OutboxStoreError, R> =>
      sql.withTransaction(Effect.mapError(effect, (error) => new Inner(error))).pipe(
        Effect.mapError((error): E | OutboxStoreError =>
          error instanceof Inner ? error.error as E : fromSqlError("transaction")(error)
        ),
        // effect/sql turns a failed ROLLBACK (and a failed COMMIT whose cleanup failed too) into
        // defects, which would kill the caller's fiber. They mean the connection died mid-
        // transaction: surface the retriable store error the port promises instead (found by
        // the pg_terminate_backend fault test).
        Effect.catchCause((cause): Effect.Effect<never, E | OutboxStoreError> => {
          for (const reason of cause.reasons) {
            if (Cause.isDieReason(reason) && isSqlError(reason.defect)) {
              return Effect.fail(fromSqlError("transaction")(reason.defect))
            }
          }
          return Effect.failCause(cause)
        })
      )
  })
})

/**
 * A failed `COMMIT` (serialization failure, deadlock, lost connection) surfaces as a retriable
 * `OutboxStoreError` with operation `"transaction"`; the caller's own errors pass through as they are.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Transactor, never, SqlClient.SqlClient> = Layer.effect(Transactor)(make)
