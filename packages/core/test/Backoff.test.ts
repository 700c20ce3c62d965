// The waits between tries that both relays share: a jittered exponential schedule capped at a
// maximum, read by attempt (claim relay), by outage count, or one failure at a time (log relay).
// Jitter comes from effect's Random and time from its Clock, so every wait here is exact.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as TestClock from "effect/testing/TestClock"
import * as Backoff from "../src/Backoff.ts"

/** A Random at the middle of the jitter range: every delay is exactly the un-jittered one. */
const middle = Effect.provideService(Random.Random, { nextIntUnsafe: () => 0, nextDoubleUnsafe: () => 0.5 })
/** A Random at the bottom of the range: every delay is 0.8 of the un-jittered one. */
const lowest = Effect.provideService(Random.Random, { nextIntUnsafe: () => 0, nextDoubleUnsafe: () => 0 })

const retryDelays = (schedule: Schedule.Schedule<unknown>, attempts: number) =>
  Effect.forEach(
    Array.from({ length: attempts }, (_, i) => i + 1),
    (attempt) => Effect.map(Backoff.retryDelay(schedule, attempt), Option.getOrThrow)
  )

describe("Backoff.exponential", () => {
  it.effect("doubles from the base and is capped at the maximum", () =>
    Effect.gen(function* () {
      const delays = yield* retryDelays(Backoff.exponential("100 millis", "1 second"), 6).pipe(middle)
      assert.deepStrictEqual(delays, [100, 200, 400, 800, 1_000, 1_000])
    })
  )

  it.effect("jitter scales each delay by 0.8 to 1.2, drawn from effect's Random; the cap holds after it", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(
        yield* retryDelays(Backoff.exponential("100 millis", "1 second"), 5).pipe(lowest),
        [80, 160, 320, 640, 1_000]
      )
      const top = Effect.provideService(Random.Random, { nextIntUnsafe: () => 0, nextDoubleUnsafe: () => 1 })
      assert.deepStrictEqual(
        yield* retryDelays(Backoff.exponential("100 millis", "1 second"), 5).pipe(top),
        [120, 240, 480, 960, 1_000]
      )
      const seeded = retryDelays(Backoff.exponential("100 millis", "10 seconds"), 6).pipe(Random.withSeed("relay"))
      assert.deepStrictEqual(yield* seeded, yield* seeded, "the same seed, the same waits")
    })
  )

  it.effect("a factor other than 2", () =>
    Effect.gen(function* () {
      const delays = yield* retryDelays(Backoff.exponential("10 millis", "1 second", 3), 4).pipe(middle)
      assert.deepStrictEqual(delays, [10, 30, 90, 270])
    })
  )
})

describe("Backoff.retryDelay and outageDelay", () => {
  it.effect("a finished schedule means give up for a retry, and its last delay for an outage", () =>
    Effect.gen(function* () {
      const finite = Schedule.spaced("10 millis").pipe(Schedule.upTo({ times: 2 }))
      assert.isTrue(Option.isSome(yield* Backoff.retryDelay(finite, 2)))
      assert.isTrue(Option.isNone(yield* Backoff.retryDelay(finite, 3)))
      assert.strictEqual(yield* Backoff.outageDelay(finite, 3), 10, "an outage is never given up on")
      assert.strictEqual(yield* Backoff.outageDelay(Backoff.exponential("100 millis", "1 second"), 3).pipe(middle), 400)
    })
  )
})

describe("Backoff.delays", () => {
  it.effect("a loop that sleeps each delay wakes exactly at 100, 300, 700 ms; reset starts over from the base", () =>
    Effect.gen(function* () {
      const delays = yield* Backoff.delays(Backoff.exponential("100 millis", "1 second"))
      const woke: Array<number> = []
      const loop = Effect.gen(function* () {
        for (let i = 0; i < 3; i++) {
          yield* Effect.sleep(yield* delays.next)
          woke.push(yield* Clock.currentTimeMillis)
        }
      })
      const fiber = yield* Effect.forkChild(loop.pipe(middle))
      yield* TestClock.adjust("99 millis")
      assert.deepStrictEqual(woke, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(woke, [100])
      yield* TestClock.adjust("600 millis")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(woke, [100, 300, 700])

      assert.strictEqual(yield* delays.next.pipe(middle), 800)
      yield* delays.reset
      assert.deepStrictEqual(yield* Effect.all([delays.next, delays.next]).pipe(middle), [100, 200])
    })
  )

  it.effect("a finished schedule keeps its last delay: the loop is never given up on", () =>
    Effect.gen(function* () {
      const delays = yield* Backoff.delays(Schedule.exponential("10 millis").pipe(Schedule.upTo({ times: 2 })))
      assert.deepStrictEqual(yield* Effect.all([delays.next, delays.next, delays.next, delays.next]), [10, 20, 20, 20])
    })
  )
})
