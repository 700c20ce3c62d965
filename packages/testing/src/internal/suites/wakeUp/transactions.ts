/**
 * `WakeUp` cases: a notify made inside a transaction arrives only after its commit and never
 * after a rollback, in this instance and through another one.
 *
 * @internal
 */
import { Transactor } from "@effect-outbox/core/Transactor"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import { settled } from "../../eventually.ts"
import { arrives, type Case, quietSubscriber, rolledBack, staysQuiet } from "./support.ts"

export const deliveredAfterCommit: Case = {
  name: "a notify inside a transaction arrives after the commit, not before",
  requires: "afterCommit",
  run: () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const transactor = yield* Transactor
      const subscriber = yield* quietSubscriber
      yield* transactor.withTransaction(
        Effect.gen(function* () {
          yield* wakeUp.notify
          yield* wakeUp.notify
          yield* staysQuiet(subscriber, "a signal arrived before the transaction committed")
        })
      )
      yield* arrives(subscriber, "the committed notify never arrived")
    })
}

export const droppedOnRollback: Case = {
  name: "a notify inside a transaction that rolls back never arrives",
  requires: "afterCommit",
  run: () =>
    Effect.gen(function* () {
      const subscriber = yield* quietSubscriber
      yield* rolledBack((yield* WakeUp).notify)
      yield* staysQuiet(subscriber, "a rolled-back notify was delivered")
    })
}

export const peerNotifyArrives: Case = {
  name: "a notify through another instance reaches this instance's subscribers",
  requires: "peer",
  run: ({ peer }) =>
    Effect.gen(function* () {
      const other = yield* peer
      const subscriber = yield* quietSubscriber
      yield* other.notify
      yield* arrives(subscriber, "another instance's notify never arrived")
      const base = yield* settled(subscriber.count)
      yield* (yield* Transactor).withTransaction(other.notify)
      yield* arrives({ count: subscriber.count, base }, "another instance's committed notify never arrived")
    })
}

export const peerRollbackDropped: Case = {
  name: "another instance's notify in a transaction that rolls back never arrives here",
  requires: ["afterCommit", "peer"],
  run: ({ peer }) =>
    Effect.gen(function* () {
      const other = yield* peer
      const subscriber = yield* quietSubscriber
      yield* rolledBack(other.notify)
      yield* staysQuiet(subscriber, "another instance's rolled-back notify was delivered")
    })
}
