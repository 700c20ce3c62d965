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
import * as Outage from "./memoryOutage.ts"
import * as Store from "./memoryStore.ts"

export const make = (engine: Engine): Transactor["Service"] => {
  const { currentTx, outage, store, takeFault } = engine
  return {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const outer = yield* currentTx
        if (outer !== undefined) return yield* effect
        return yield* Effect.uninterruptibleMask((restore) =>
          Effect.gen(function* () {
            const down = Outage.errorFor(outage, "begin", undefined)
            if (down !== undefined) return yield* down
            const beginFault = takeFault("begin", "before")
            if (beginFault !== undefined) return yield* beginFault
            const tx = Store.begin(store)
            outage.begunIn.set(tx, outage.epoch)
            const exit = yield* Effect.exit(restore(Effect.provideService(effect, CurrentTransaction, tx)))
            if (Exit.isFailure(exit)) {
              Store.rollback(tx)
              return yield* exit
            }
            const atCommit = Outage.commitOutcome(outage, tx)
            if (atCommit._tag === "refused") {
              Store.rollback(tx)
              return yield* atCommit.error
            }
            if (atCommit._tag === "lostAck") {
              Store.commit(tx)
              return yield* atCommit.error
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
