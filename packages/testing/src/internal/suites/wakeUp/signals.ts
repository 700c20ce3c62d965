/**
 * `WakeUp` cases: a notify reaches every subscriber, and bursts fold into fewer signals but
 * never into none.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { settled } from "../../eventually.ts"
import { arrives, type Case, quietSubscriber, staysQuiet } from "./support.ts"

export const notifyReachesASubscriber: Case = {
  name: "a notify outside a transaction reaches a subscriber",
  run: () =>
    Effect.gen(function* () {
      const subscriber = yield* quietSubscriber
      yield* (yield* WakeUp).notify
      yield* arrives(subscriber, "the notify never arrived")
    })
}

export const everySubscriberIsSignalled: Case = {
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

export const burstsFoldButArrive: Case = {
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

export const laterSubscriberStillSignalled: Case = {
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
