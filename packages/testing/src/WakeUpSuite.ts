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
 * The suite is a table of named cases (Watermill's shape): {@link cases} lists them, each with
 * the feature it needs; {@link suite} registers the ones the adapter offers.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Transactor } from "@effect-outbox/core/Transactor"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { registerCases } from "./internal/caseTable.ts"
import { counting, eventually, settled } from "./internal/eventually.ts"

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

/**
 * What a case gets besides the services: a way to build a peer instance (the cross-instance
 * cases run only when the adapter gives one).
 *
 * @since 0.1.0
 * @category models
 */
export interface CaseContext<R> {
  readonly peer: Effect.Effect<WakeUp["Service"], unknown, Services | R | Scope.Scope>
}

/**
 * One named case: `needs` names what the adapter must offer for it to run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly needs?: "afterCommit" | "peer" | "afterCommit+peer"
  readonly run: <R>(context: CaseContext<R>) => Effect.Effect<void, unknown, Services | R | Scope.Scope>
}

/** A subscriber whose count has gone quiet: the signals it had under way are behind it. */
const quietSubscriber = Effect.gen(function* () {
  const wakeUp = yield* WakeUp
  const count = yield* counting(wakeUp.signals)
  const base = yield* settled(count)
  return { count, base }
})

const arrives = (subscriber: { readonly count: Ref.Ref<number>; readonly base: number }, what: string) =>
  eventually(Ref.get(subscriber.count), (n) => n > subscriber.base, what, 10_000)

const staysQuiet = (subscriber: { readonly count: Ref.Ref<number>; readonly base: number }, what: string) =>
  Effect.gen(function* () {
    yield* Effect.sleep("500 millis")
    assert.strictEqual(yield* Ref.get(subscriber.count), subscriber.base, what)
  })

const rolledBack = <R>(notify: Effect.Effect<void, unknown, R>) =>
  Effect.gen(function* () {
    const transactor = yield* Transactor
    const error = yield* Effect.flip(
      transactor.withTransaction(Effect.andThen(notify, Effect.fail("rollback" as const)))
    )
    assert.strictEqual(error, "rollback")
  })

const notifyReachesASubscriber: Case = {
  name: "a notify outside a transaction reaches a subscriber",
  run: () =>
    Effect.gen(function* () {
      const subscriber = yield* quietSubscriber
      yield* (yield* WakeUp).notify
      yield* arrives(subscriber, "the notify never arrived")
    })
}

const everySubscriberIsSignalled: Case = {
  name: "every subscriber sees a notify",
  run: () =>
    Effect.gen(function* () {
      const subscribers = yield* Effect.all([quietSubscriber, quietSubscriber, quietSubscriber], {
        concurrency: "unbounded"
      })
      yield* (yield* WakeUp).notify
      yield* Effect.forEach(subscribers, (s, i) => arrives(s, `subscriber ${i} never saw the notify`))
    })
}

const burstsFoldButArrive: Case = {
  name: "a burst of notifies arrives as at least one and at most as many signals, then signals stop",
  run: () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const subscriber = yield* quietSubscriber
      yield* Effect.forEach(Array.from({ length: 50 }), () => wakeUp.notify, { concurrency: "unbounded" })
      yield* arrives(subscriber, "a burst of 50 notifies produced no signal")
      const after = yield* settled(subscriber.count)
      assert.isAtMost(after - subscriber.base, 50, "a burst must not be amplified")
      yield* staysQuiet({ count: subscriber.count, base: after }, "signals went on after the burst")
    })
}

const laterSubscriberStillSignalled: Case = {
  name: "a subscriber that leaves does not silence the ones that come after it",
  run: () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const first = yield* Effect.forkChild(Stream.runDrain(wakeUp.signals))
      yield* Effect.sleep("200 millis")
      yield* Fiber.interrupt(first)
      const later = yield* quietSubscriber
      yield* wakeUp.notify
      yield* arrives(later, "a subscriber that came after another left saw no notify")
    })
}

const deliveredAfterCommit: Case = {
  name: "a notify inside a transaction arrives after the commit, not before",
  needs: "afterCommit",
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

const droppedOnRollback: Case = {
  name: "a notify inside a transaction that rolls back never arrives",
  needs: "afterCommit",
  run: () =>
    Effect.gen(function* () {
      const subscriber = yield* quietSubscriber
      yield* rolledBack((yield* WakeUp).notify)
      yield* staysQuiet(subscriber, "a rolled-back notify was delivered")
    })
}

const peerNotifyArrives: Case = {
  name: "a notify through another instance reaches this instance's subscribers",
  needs: "peer",
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

const peerRollbackDropped: Case = {
  name: "another instance's notify in a transaction that rolls back never arrives here",
  needs: "afterCommit+peer",
  run: ({ peer }) =>
    Effect.gen(function* () {
      const other = yield* peer
      const subscriber = yield* quietSubscriber
      yield* rolledBack(other.notify)
      yield* staysQuiet(subscriber, "another instance's rolled-back notify was delivered")
    })
}

/**
 * Every case of the suite, in the order it runs them.
 *
 * @since 0.1.0
 * @category suites
 */
export const cases: ReadonlyArray<Case> = [
  notifyReachesASubscriber,
  everySubscriberIsSignalled,
  burstsFoldButArrive,
  laterSubscriberStillSignalled,
  deliveredAfterCommit,
  droppedOnRollback,
  peerNotifyArrives,
  peerRollbackDropped
]

/**
 * Registers the cases the adapter offers under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const afterCommit = options.features?.afterCommit ?? true
  const peer = options.peer
  const offered = (needs: Case["needs"]) => {
    switch (needs) {
      case undefined:
        return true
      case "afterCommit":
        return afterCommit
      case "peer":
        return peer !== undefined
      case "afterCommit+peer":
        return afterCommit && peer !== undefined
    }
  }
  registerCases(`${name} (WakeUp conformance)`, cases, {
    offered: (c) => offered(c.needs),
    run: (c) => c.run<R>({ peer: peer ?? Effect.die("no peer") }).pipe(Effect.scoped, Effect.provide(options.layer())),
    timeout: options.timeout ?? 60_000
  })
}
