/**
 * The proof that code runs inside an outbox transaction, and the one way to get it: the
 * `withTransaction` of an `Outbox` (re-exported from `Outbox.ts`).
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { StoreError } from "../../Errors.ts"
import type { Transactor } from "../../Transactor.ts"

export class InTransaction extends Context.Service<InTransaction, { readonly _tag: "InTransaction" }>()(
  "@effect-outbox/core/Outbox/InTransaction"
) {}

const proof = InTransaction.of({ _tag: "InTransaction" })

export const withTransactionOf =
  (transactor: Transactor["Service"]) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreError, Exclude<R, InTransaction>> =>
    transactor.withTransaction(Effect.provideService(effect, InTransaction, proof))

const outsideTransaction = new Error(
  "Outbox.enqueue ran outside a transaction: run it inside Outbox.withTransaction (with the writes it " +
    "goes with), or call Outbox.enqueueAutocommit for an event that needs no transaction of yours"
)

/**
 * `effect`, or a defect naming `Outbox.withTransaction` when the proof is missing. The type
 * already requires it; this catches code that cast the requirement away (`any`).
 */
export const inTransactionOnly = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | InTransaction> =>
  Effect.withFiber((fiber) =>
    Context.getOrUndefined(fiber.context, InTransaction) === undefined ? Effect.die(outsideTransaction) : effect
  )
