// The retry policy of the adapter's broker calls (metadata, offsets, group lookups, topic
// creation, consumer start): which errors it retries, how its delays grow, and that it gives up
// within its bound with the caller's last error.
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import Kafkajs from "kafkajs"
import * as KafkaErrors from "../src/KafkaErrors.ts"
import * as KafkaRetry from "../src/KafkaRetry.ts"

const protocol = (type: string, retriable: boolean) =>
  new Kafkajs.KafkaJSProtocolError({ message: `broker says ${type}`, type, code: 0, retriable } as never)

const exhausted = (cause: Error) =>
  new Kafkajs.KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 1000 })

/** An effect that fails with `errors` in turn, then succeeds with the number of attempts. */
const flaky = (errors: ReadonlyArray<unknown>) => {
  let attempts = 0
  const effect = Effect.suspend(() => {
    attempts++
    return attempts <= errors.length ? Effect.fail(errors[attempts - 1]) : Effect.succeed(attempts)
  })
  return { effect, attempts: () => attempts }
}

const quick = { initialDelayMillis: 5, maxDelayMillis: 20, totalMillis: 300 }

describe("KafkaRetry", () => {
  it("a broker that is starting, a coordinator that is loading or moved, a lost connection are retried", () => {
    for (const error of [
      protocol("NOT_COORDINATOR_FOR_GROUP", true),
      protocol("GROUP_LOAD_IN_PROGRESS", true),
      protocol("GROUP_COORDINATOR_NOT_AVAILABLE", true),
      protocol("LEADER_NOT_AVAILABLE", true),
      exhausted(protocol("NOT_COORDINATOR_FOR_GROUP", true)),
      new Kafkajs.KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:9092"),
      exhausted(new Kafkajs.KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:9092")),
      new Kafkajs.KafkaJSRequestTimeoutError("Request Metadata(key: 3, version: 6) timed out")
    ])
      assert.isTrue(KafkaErrors.isRetriableBrokerCall(error), KafkaErrors.describe(error))
  })

  it("answers are not retried: no such topic, already exists, bad requests, producer state", () => {
    for (const error of [
      protocol("UNKNOWN_TOPIC_OR_PARTITION", true),
      protocol("TOPIC_ALREADY_EXISTS", false),
      protocol("INVALID_PARTITIONS", false),
      protocol("TOPIC_AUTHORIZATION_FAILED", false),
      protocol("OUT_OF_ORDER_SEQUENCE_NUMBER", false),
      new TypeError("not a kafkajs error")
    ])
      assert.isFalse(KafkaErrors.isRetriableBrokerCall(error), KafkaErrors.describe(error))
  })

  it.effect("the schedule doubles from the initial delay, jittered, capped, and stops after the total time", () =>
    Effect.gen(function* () {
      const step = yield* Schedule.toStep(
        KafkaRetry.schedule({ initialDelayMillis: 100, maxDelayMillis: 1_000, totalMillis: 5_000 })
      )
      const delays: Array<number> = []
      let now = 0
      for (let i = 0; i < 8; i++) {
        const [, delay] = yield* step(now, undefined)
        delays.push(Duration.toMillis(delay))
        now += Duration.toMillis(delay)
      }
      const nominal = [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000]
      delays.forEach((d, i) => {
        assert.isAtLeast(d, nominal[i]! * 0.8, `delay ${i}: ${d}`)
        assert.isAtMost(d, nominal[i]! * 1.2, `delay ${i}: ${d}`)
      })
      // Jitter: the capped delays are not all the same.
      assert.isAbove(new Set(delays.slice(4)).size, 1)
      // Past the total time since the first step, no more recurrences.
      const past = yield* Effect.exit(step(5_001, undefined))
      assert.isTrue(Exit.isFailure(past))
    })
  )

  it.effect("retries retriable errors until the call succeeds", () =>
    Effect.gen(function* () {
      const call = flaky([protocol("GROUP_LOAD_IN_PROGRESS", true), protocol("NOT_COORDINATOR_FOR_GROUP", true)])
      const attempts = yield* KafkaRetry.retrying(call.effect, "test").pipe(
        Effect.provideService(KafkaRetry.CurrentPolicy, quick)
      )
      assert.strictEqual(attempts, 3)
    })
  )

  it.effect("a non-retriable error fails at once, as it was", () =>
    Effect.gen(function* () {
      const error = protocol("TOPIC_AUTHORIZATION_FAILED", false)
      const call = flaky([error])
      const exit = yield* Effect.exit(KafkaRetry.retrying(call.effect, "test"))
      assert.deepStrictEqual(exit, Exit.fail(error))
      assert.strictEqual(call.attempts(), 1)
    })
  )

  // it.effect runs under a TestClock; the retries still happen, on the wall clock.
  it.effect("gives up within its bound with the last error", () =>
    Effect.gen(function* () {
      let attempts = 0
      const refused = Effect.suspend(() => {
        attempts++
        return Effect.fail(new Kafkajs.KafkaJSConnectionError(`ECONNREFUSED (attempt ${attempts})`))
      })
      const started = Date.now()
      const error = yield* KafkaRetry.retrying(refused, "test").pipe(
        Effect.provideService(KafkaRetry.CurrentPolicy, quick),
        Effect.flip
      )
      const elapsed = Date.now() - started
      assert.isAtLeast(elapsed, quick.totalMillis)
      assert.isBelow(elapsed, quick.totalMillis + 2_000)
      assert.isAtLeast(attempts, 5)
      // The error of the last attempt, unchanged: the caller maps it to its typed error.
      assert.instanceOf(error, Kafkajs.KafkaJSConnectionError)
      assert.include(error.message, `attempt ${attempts}`)
    })
  )

  it.effect("errors a custom predicate rejects are not retried", () =>
    Effect.gen(function* () {
      const call = flaky([protocol("REBALANCE_IN_PROGRESS", true)])
      const exit = yield* Effect.exit(KafkaRetry.retrying(call.effect, "test", { isRetriable: () => false }))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(call.attempts(), 1)
    })
  )
})
