/**
 * What the `WakeUp` cases share: the services under test, the feature switches, and subscribers
 * counted once their signals have gone quiet (signals are hints: an adapter may emit more than
 * were asked for, so the cases count only after a subscription has settled).
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { Transactor } from "@effect-outbox/core/Transactor"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import { counting, eventually, settled } from "../../eventually.ts"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = WakeUp | Transactor

/**
 * The suite's feature switches: `afterCommit` is documented on `WakeUpSuite.Features`; `peer` is
 * on when the adapter gives a second instance.
 */
export type Feature = "afterCommit" | "peer"

export interface Context {
  /** A second, independent instance over the same store, built in the test's scope. */
  readonly peer: Effect.Effect<WakeUp["Service"], unknown, Scope.Scope>
}

export type Case = SuiteCase.Case<Context, Services | Scope.Scope, Feature>

export interface Subscriber {
  readonly count: Ref.Ref<number>
  readonly base: number
}

/** A subscriber whose count has gone quiet: the signals it had under way are behind it. */
export const quietSubscriber = Effect.gen(function* () {
  const wakeUp = yield* WakeUp
  const count = yield* counting(wakeUp.signals)
  const base = yield* settled(count)
  return { count, base } satisfies Subscriber
})

export const arrives = (subscriber: Subscriber, what: string) =>
  eventually(Ref.get(subscriber.count), (n) => n > subscriber.base, what, 10_000)

export const staysQuiet = (subscriber: Subscriber, what: string) =>
  Effect.gen(function* () {
    yield* Effect.sleep("500 millis")
    assert.strictEqual(yield* Ref.get(subscriber.count), subscriber.base, what)
  })

export const rolledBack = <R>(notify: Effect.Effect<void, unknown, R>) =>
  Effect.gen(function* () {
    const transactor = yield* Transactor
    const error = yield* Effect.flip(
      transactor.withTransaction(Effect.andThen(notify, Effect.fail("rollback" as const)))
    )
    assert.strictEqual(error, "rollback")
  })
