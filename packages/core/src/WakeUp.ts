/**
 * The wake-up port: enqueueing tells idle relays that new work exists, so they need not
 * poll hot. The signal is only a hint: a relay that misses one still finds the work at its next
 * poll, so a lost signal costs latency, never an event.
 *
 * PostgreSQL implements it after the enqueueing transaction commits (nothing on rollback): an
 * in-process signal to the relays of the same layer and a coalesced `NOTIFY` for the others, with
 * `LISTEN` in the relays (`NOTIFY` inside the transaction is an option); the in-memory version
 * signals at once.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import type { StoreError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class WakeUp extends Context.Service<
  WakeUp,
  {
    /**
     * Announces new work. Called inside the enqueueing transaction: an implementation that can,
     * delivers it only after commit, and never after a rollback.
     */
    readonly notify: Effect.Effect<void, StoreError>
    /**
     * The signals, from the moment of subscription. Bursts may be coalesced into one signal.
     */
    readonly signals: Stream.Stream<void>
  }
>()("@effect-outbox/core/WakeUp") {}

/**
 * An in-process wake-up: every subscriber of `signals` sees the `notify` calls made after it
 * subscribed, coalesced (a subscriber that is busy keeps at most one pending signal).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<WakeUp> = Layer.effect(WakeUp)(
  Effect.gen(function* () {
    const pubsub = yield* PubSub.sliding<void>(1)
    return {
      notify: Effect.asVoid(PubSub.publish(pubsub, undefined)),
      signals: Stream.fromPubSub(pubsub)
    }
  })
)

/**
 * No wake-up at all: relays find work only by polling.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPollingOnly: Layer.Layer<WakeUp> = Layer.succeed(WakeUp)({
  notify: Effect.void,
  signals: Stream.never
})
