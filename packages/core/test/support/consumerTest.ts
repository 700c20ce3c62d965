/**
 * What the consumer's TestClock specifications share: waiting for the background consumer, and
 * reading the in-memory broker's committed offset.
 */
import { assert } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/testing/TestClock"

/** Lets the background consumer run (and the TestClock move by `step`) until `check` holds. */
export const eventually = <E, R>(
  label: string,
  check: Effect.Effect<boolean, E, R>,
  step: Duration.Input = "50 millis"
) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500; i++) {
      if (yield* check) return
      yield* Effect.yieldNow
      yield* TestClock.adjust(step)
    }
    assert.fail(`timed out waiting until ${label}`)
  })

/** The offset group `groupId` committed on `orders`' `partition`, if any. */
export const committedOffset = (groupId = "billing", partition = 0) =>
  Effect.gen(function* () {
    const broker = yield* InMemoryBroker.InMemoryBroker
    const commits = yield* broker.committed(groupId)
    return commits.find((c) => c.topic === "orders" && c.partition === partition)?.offset
  })
