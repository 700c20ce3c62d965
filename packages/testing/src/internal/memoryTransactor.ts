/**
 * `Transactor` over the in-memory engine: staged writes in a transaction carried by the fiber,
 * applied atomically on success, discarded on failure, defect or interruption; nested calls join.
 *
 * @internal
 */
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { CurrentTransaction, type Engine } from "./memoryEngine.ts"
import * as Store from "./memoryStore.ts"

export const make = (engine: Engine): Transactor["Service"] => {
  const { currentTx, store, takeFault } = engine
  return {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const outer = yield* currentTx
        if (outer !== undefined) return yield* effect
        return yield* Effect.uninterruptibleMask((restore) =>
          Effect.gen(function* () {
            const beginFault = takeFault("begin", "before")
            if (beginFault !== undefined) return yield* beginFault
            const tx = Store.begin(store)
            const exit = yield* Effect.exit(restore(Effect.provideService(effect, CurrentTransaction, tx)))
            if (Exit.isFailure(exit)) {
              Store.rollback(tx)
              return yield* exit
            }
            const before = takeFault("commit", "before")
            if (before !== undefined) {
              Store.rollback(tx)
              return yield* before
            }
            Store.commit(tx)
            const after = takeFault("commit", "after")
            if (after !== undefined) return yield* after
            return exit.value
          })
        )
      })
  }
}
