// Lost group membership (internal/membership.ts), on a fake consumer: the client emits a plain
// 'error' when a rejoin after a failed heartbeat fails, and with no listener Node throws it as an
// uncaught exception (it ended a CI run, thrown from the socket's close handler while a consumer
// closed mid-rebalance). The adapter rejoins instead, and ends the subscription only when the
// rejoin cannot succeed. (Live clock: the fake answers in real time.)
import { EventEmitter } from "node:events"
import { assert, describe, it } from "@effect/vitest"
import { NetworkError, UserError } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import { type AnyConsumer, makeState } from "../src/internal/handoff.ts"
import { keepMembership } from "../src/internal/membership.ts"
import { CurrentPolicy } from "../src/PlatformaticRetry.ts"

const groupOptions = { sessionTimeout: 30_000, rebalanceTimeout: 60_000, heartbeatInterval: 3_000 }

/** A consumer whose `joinGroup` answers with the next outcome in `outcomes` (then succeeds). */
const fakeConsumer = (outcomes: Array<Error>) => {
  const joins: Array<unknown> = []
  const consumer = Object.assign(new EventEmitter(), {
    joinGroup: (options: unknown) => {
      joins.push(options)
      const outcome = outcomes.shift()
      return outcome === undefined ? Promise.resolve("member-1") : Promise.reject(outcome)
    }
  })
  return { consumer, asConsumer: consumer as unknown as AnyConsumer, joins }
}

const lostMembership = () => new NetworkError("Connection closed")

describe("platformatic group membership", () => {
  it.live("a lost membership does not throw: the member rejoins and the subscription goes on", () =>
    Effect.gen(function* () {
      const { consumer, asConsumer, joins } = fakeConsumer([])
      const state = makeState(asConsumer)
      yield* keepMembership(asConsumer, state, groupOptions)
      consumer.emit("error", lostMembership())
      yield* Effect.sleep("20 millis")
      assert.deepStrictEqual(joins, [groupOptions])
      assert.isUndefined(state.failure)
    }).pipe(Effect.scoped)
  )

  it.live("a rejoin that fails while the broker is unreachable is retried", () =>
    Effect.gen(function* () {
      const { consumer, asConsumer, joins } = fakeConsumer([new NetworkError("Connection refused")])
      const state = makeState(asConsumer)
      yield* keepMembership(asConsumer, state, groupOptions)
      consumer.emit("error", lostMembership())
      yield* Effect.sleep("100 millis")
      assert.strictEqual(joins.length, 2)
      assert.isUndefined(state.failure)
    }).pipe(
      Effect.scoped,
      Effect.provideService(CurrentPolicy, { initialDelayMillis: 5, maxDelayMillis: 10, totalMillis: 1_000 })
    )
  )

  it.live("a rejoin that cannot succeed ends the subscription with a typed error and wakes the waiting pull", () =>
    Effect.gen(function* () {
      const { consumer, asConsumer } = fakeConsumer([new UserError("group authorization failed")])
      const state = makeState(asConsumer)
      let woken = false
      state.wake = () => {
        woken = true
      }
      yield* keepMembership(asConsumer, state, groupOptions)
      consumer.emit("error", lostMembership())
      yield* Effect.sleep("20 millis")
      assert.strictEqual(state.failure?._tag, "ConsumerSourceError")
      assert.strictEqual(state.failure?.operation, "rejoin")
      assert.include(state.failure?.reason ?? "", "group authorization failed")
      assert.isTrue(woken)
    }).pipe(Effect.scoped)
  )

  it.live("once the subscription is closing, a lost membership is ignored", () =>
    Effect.gen(function* () {
      const { consumer, asConsumer, joins } = fakeConsumer([])
      const state = makeState(asConsumer)
      yield* keepMembership(asConsumer, state, groupOptions)
      state.closed = true
      consumer.emit("error", lostMembership())
      yield* Effect.sleep("20 millis")
      assert.deepStrictEqual(joins, [])
      assert.isUndefined(state.failure)
    }).pipe(Effect.scoped)
  )
})
