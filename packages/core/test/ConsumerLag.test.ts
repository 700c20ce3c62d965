// Consumer lag as the runtime reports it: OutboxRuntime samples `outbox_consumer_lag` for every
// consumer it runs, from the broker's committed offsets (here the in-memory broker; the same
// reading on Kafka is in adapter-kafka's ConsumerLag test), so a consumer stuck retrying a record
// shows its backlog instead of its last good sample.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as References from "effect/References"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Outbox from "../src/Outbox.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import * as WakeUp from "../src/WakeUp.ts"

const Greeting = Schema.Struct({ to: Schema.String, n: Schema.Int })
const Greetings = Topic.make({ name: "greetings", schema: Greeting, key: () => "one-key" })

class NotYet extends Schema.TaggedError<NotYet>()("NotYet", {}) {}

describe("consumer lag", () => {
  it("lagOf counts from the committed offset, the log start, or the end", () => {
    const at = (committed: string | null, start = "0", end = "10") => ({
      topic: "t",
      partition: 0,
      committed,
      start,
      end
    })
    assert.strictEqual(Telemetry.lagOf(at("4")), 6)
    assert.strictEqual(Telemetry.lagOf(at("10")), 0)
    assert.strictEqual(Telemetry.lagOf(at(null), { fromBeginning: true }), 10)
    assert.strictEqual(Telemetry.lagOf(at(null)), 10)
    assert.strictEqual(Telemetry.lagOf(at(null), { fromBeginning: false }), 0)
    // Retention removed records the group never read: it can only read from the log start.
    assert.strictEqual(Telemetry.lagOf(at("2", "5")), 5)
    assert.strictEqual(Telemetry.lagOf(at(null, "5"), { fromBeginning: true }), 5)
    // Offsets past int53 still subtract exactly.
    assert.strictEqual(Telemetry.lagOf(at("9007199254740993", "0", "9007199254741000")), 7)
  })

  it.live("the runtime samples every running consumer's lag; it holds while a record is retried, then reaches 0", () =>
    Effect.gen(function* () {
      let stuck = true
      let tries = 0
      const handled: Array<number> = []
      const greeter = OutboxRuntime.consumer(
        Topic.consumer(Greetings, {
          groupId: "lag-greeter",
          fromBeginning: true,
          maxAttempts: 100_000,
          retrySchedule: Schedule.spaced("5 millis"),
          handler: ({ payload }) =>
            Effect.suspend(() => {
              if (payload.n === 3 && stuck) {
                tries++
                return Effect.fail(new NotYet())
              }
              handled.push(payload.n)
              return Effect.void
            })
        })
      )
      const runtime = OutboxRuntime.layer({
        relay: { pollInterval: Duration.millis(20), instances: 1 },
        consumers: [greeter],
        metricsInterval: Duration.millis(20)
      }).pipe(
        Layer.provideMerge(
          Layer.mergeAll(
            InMemoryDatabase.layer,
            WakeUp.layerMemory,
            // One record per batch, so each finished record is committed on its own.
            InMemoryBroker.layer({ topics: { greetings: 1, "greetings.DLT": 1 }, maxBatchSize: 1 })
          )
        )
      )
      const gauge = Metric.withAttributes(Telemetry.consumerLag, {
        group: "lag-greeter",
        topic: "greetings",
        partition: "0"
      })
      const lagIs = (expected: number) =>
        Effect.gen(function* () {
          for (let i = 0; i < 500; i++) {
            if ((yield* Metric.value(gauge)).value === expected) return
            yield* Effect.sleep("10 millis")
          }
          assert.fail(`outbox_consumer_lag never read ${expected}; it reads ${(yield* Metric.value(gauge)).value}`)
        })

      yield* Effect.gen(function* () {
        yield* Outbox.withTransaction(
          Topic.enqueueAll(
            Greetings,
            [1, 2, 3, 4, 5].map((n) => ({ to: "ada", n }))
          )
        )
        // 1 and 2 are done and committed; 3 is retried over and over: 3, 4 and 5 are behind.
        yield* lagIs(3)
        while (tries < 20) yield* Effect.sleep("10 millis")
        assert.deepStrictEqual(handled, [1, 2])
        yield* Effect.sleep("100 millis")
        assert.strictEqual((yield* Metric.value(gauge)).value, 3)
        // More events while it is stuck: the lag grows.
        yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 6 })
        yield* lagIs(4)
        stuck = false
        yield* lagIs(0)
        assert.deepStrictEqual(handled, [1, 2, 3, 4, 5, 6])
      }).pipe(Effect.provide(runtime), Effect.scoped)
    }).pipe(
      Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: {} }))),
      Effect.provideService(References.MinimumLogLevel, "None")
    )
  )
})
