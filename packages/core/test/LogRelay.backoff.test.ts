// The log relay waits between failed tries on the shared Backoff schedule, on effect's Clock and
// Random: doubling from `backoff`, and from the start again after a window goes through.
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryLog from "@effect-outbox/testing/InMemoryLog"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as TestClock from "effect/testing/TestClock"
import type { LogMessage } from "../src/LogRecord.ts"
import * as LogRelay from "../src/LogRelay.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const event = (n: number): LogMessage => {
  const id = randomUUID() as EventId
  return {
    id,
    topic: "orders",
    key: `k${n}`,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(`${n}`),
    createdAt: 0
  }
}

// The middle of the jitter range: each wait is exactly the schedule's un-jittered delay.
const middle = { nextIntUnsafe: () => 0, nextDoubleUnsafe: () => 0.5 }

describe("LogRelay backoff", () => {
  it.effect(
    "failed probes wait 100, 200, 400 ms; after a window goes through, the next failure waits 100 ms again",
    () =>
      Effect.gen(function* () {
        const log = yield* InMemoryLog.make
        const broker = yield* InMemoryBroker.make({ topics: { orders: 1 } })
        const layer = Layer.merge(InMemoryLog.layerFrom(log), InMemoryBroker.layerFrom(broker))
        const published = Effect.map(broker.control.records("orders"), (records) => records.length)
        yield* log.commit([event(1), event(2)])
        // A new holder probes the window a predecessor may have sent; the broker cannot answer thrice.
        yield* broker.control.failNext({ operation: "probe", count: 3 })
        const relay = yield* Effect.forkChild(
          LogRelay.run({ backoff: "100 millis", maxBackoff: "10 seconds", maxProbeFailures: 10 }).pipe(
            Effect.provide(layer),
            Effect.provideService(Random.Random, middle)
          )
        )
        const at = [99, 1, 199, 1, 399, 1]
        const fired = [1, 2, 2, 3, 3, 3]
        const sent = [0, 0, 0, 0, 0, 2]
        for (let i = 0; i < at.length; i++) {
          yield* TestClock.adjust(at[i]!)
          assert.strictEqual(yield* broker.control.faultsFired, fired[i], `faults fired after step ${i}`)
          assert.strictEqual(yield* published, sent[i], `records published after step ${i}`)
        }

        // The relay's waits start over: one refused publish waits the base delay, not 800 ms.
        yield* broker.control.failPublish({ fault: "retriable", count: 1 })
        yield* log.commit([event(3)])
        yield* TestClock.adjust(0)
        assert.strictEqual(yield* published, 2)
        yield* TestClock.adjust(99)
        assert.strictEqual(yield* published, 2)
        yield* TestClock.adjust(1)
        assert.strictEqual(yield* published, 3)
        yield* Fiber.interrupt(relay)
      })
  )
})
