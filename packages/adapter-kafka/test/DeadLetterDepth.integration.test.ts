// The dead-letter depth on the real broker (R5.3): the consumer dead-letters poison records to
// `<topic>.DLT`, the depth (and its gauge) counts them, and replaying them brings it down.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import * as Inbox from "@effect-outbox/core/Inbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { freshTopic, KafkaTest, namedTopic, request } from "./support.ts"

const Order = Schema.Struct({ n: Schema.Number })

class Poison extends Schema.TaggedError<Poison>()("Poison", { n: Schema.Number, retriable: Schema.Boolean }) {}

const Live = Layer.mergeAll(Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)), KafkaTest)

layer(Live, { timeout: "120 seconds", excludeTestServices: true })("dead-letter depth on Kafka", (it) => {
  it.effect("dead-lettered records are counted as not replayed; replaying them brings the count down", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2, "depth")
      const dlt = DeadLetter.defaultTopic(topic)
      yield* namedTopic(dlt, 2)
      const gauge = Effect.map(
        Metric.value(Metric.withAttributes(Telemetry.deadLettersPending, { topic: dlt })),
        (s) => s.value
      )
      const depth = Effect.map(DeadLetterDepth.sample(dlt), Option.getOrThrow)

      // Six records, three of them poison (odd n), over both partitions.
      const sent = yield* Effect.forEach([1, 2, 3, 4, 5, 6], (n) =>
        Effect.map(request(topic, { key: `k${n}`, partition: n % 2 }), (r) => ({ ...r, payload: jsonPayload({ n }) }))
      )
      yield* (yield* Publisher).publish(sent)
      const poisonIds = sent.filter((_, i) => (i + 1) % 2 === 1).map((r) => r.id)

      yield* Effect.gen(function* () {
        yield* Consumer.make({
          groupId: `adapter-kafka-depth-${randomUUID()}`,
          topics: [topic],
          schema: Order,
          fromBeginning: true,
          maxAttempts: 1,
          retrySchedule: Schedule.spaced("100 millis"),
          handler: (m) =>
            m.payload.n % 2 === 1 ? Effect.fail(new Poison({ n: m.payload.n, retriable: false })) : Effect.void
        })
        const deadline = Date.now() + 60_000
        while (Date.now() < deadline && (yield* depth).total < 3) yield* Effect.sleep("200 millis")
      }).pipe(Effect.scoped)

      const dead = yield* depth
      assert.strictEqual(dead.total, 3, "three dead letters on the DLT")
      assert.strictEqual(dead.pending, 3, "none replayed yet")
      assert.strictEqual(yield* gauge, 3)

      const nothing = yield* DeadLetter.replay({ from: dlt, filter: () => false })
      assert.strictEqual(nothing.skipped, 3)
      assert.strictEqual((yield* depth).pending, 3, "a replay of nothing moves nothing")
      // The poison records all came from source partition 1, dead-lettered in the order 1, 3, 5:
      // 1 and 3 are the oldest dead letters of whichever DLT partitions they landed on.
      const first = yield* DeadLetter.replay({
        from: dlt,
        filter: (letter) => letter.eventId === poisonIds[0] || letter.eventId === poisonIds[1]
      })
      assert.strictEqual(first.replayed.length, 2)
      const afterFirst = yield* depth
      assert.strictEqual(afterFirst.pending, 1)
      assert.strictEqual(yield* gauge, afterFirst.pending)

      const rest = yield* DeadLetter.replay({ from: dlt })
      assert.strictEqual(rest.replayed.length, 3, "replay --all republishes every dead letter")
      const after = yield* depth
      assert.deepStrictEqual([after.pending, after.total], [0, 3], "none left to replay; they stay on the DLT")
      assert.strictEqual(yield* gauge, 0)
    })
  )
})
