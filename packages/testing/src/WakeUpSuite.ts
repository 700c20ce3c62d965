/**
 * The conformance suite of the `WakeUp` port: a `notify` reaches every subscriber of
 * `signals`, bursts fold into fewer signals but never into none, and — where the adapter can —
 * a notify made inside a transaction arrives only after its commit and never after a rollback,
 * in this process and in others.
 *
 * Signals are hints: an adapter may emit more than were asked for (PostgreSQL's listener
 * signals once on every connect), so the cases count signals after the subscription has gone
 * quiet and assert only what a relay relies on.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/wakeUp/`.
 *
 * @since 0.1.0
 */
import type { Transactor } from "@effect-outbox/core/Transactor"
import type { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Signals from "./internal/suites/wakeUp/signals.ts"
import type * as Support from "./internal/suites/wakeUp/support.ts"
import * as Transactions from "./internal/suites/wakeUp/transactions.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = WakeUp | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /**
   * A `notify` inside a `Transactor` transaction is delivered only after the commit, and never
   * after a rollback. An adapter whose wake-up knows no transaction (the in-memory one) signals
   * at once: an early or spurious signal costs a relay one empty claim, never an event.
   */
  readonly afterCommit?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Fresh services for every test; may provide extra services `R` that `peer` uses. */
  readonly layer: () => Layer.Layer<Services | R, unknown>
  /**
   * A second, independent instance over the same store (another process's relays), built in the
   * test's scope. Without it the cross-instance cases do not run.
   */
  readonly peer?: Effect.Effect<WakeUp["Service"], unknown, Services | R | Scope.Scope>
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 60 000). */
  readonly timeout?: number
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Signals.notifyReachesASubscriber,
  Signals.everySubscriberIsSignalled,
  Signals.burstsFoldButArrive,
  Signals.laterSubscriberStillSignalled,
  Transactions.deliveredAfterCommit,
  Transactions.droppedOnRollback,
  Transactions.peerNotifyArrives,
  Transactions.peerRollbackDropped
]

/**
 * Registers the cases the adapter offers under `describe(name)`, each on a fresh layer in its
 * own scope (the cross-instance cases only when the adapter gives a `peer`).
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const peer = options.peer
  SuiteCase.register(`${name} (WakeUp conformance)`, cases, {
    features: { afterCommit: options.features?.afterCommit ?? true, peer: peer !== undefined },
    run: (c) =>
      Effect.gen(function* () {
        // The peer is built on this test's services, in its scope.
        const services = yield* Effect.context<Services | R | Scope.Scope>()
        return yield* c.run({ peer: Effect.provide(peer ?? Effect.die("no peer"), services) })
      }).pipe(Effect.scoped, Effect.provide(options.layer())),
    timeout: options.timeout ?? 60_000
  })
}
