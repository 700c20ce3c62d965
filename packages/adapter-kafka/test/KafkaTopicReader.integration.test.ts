// KafkaTopicReader against the real broker (R5.3): a bounded read of what a topic held when the
// read started.

import { assert, layer } from "@effect/vitest"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { freshTopic, KafkaTest, request, text } from "./support.ts"

layer(KafkaTest, { timeout: "90 seconds", excludeTestServices: true })("KafkaTopicReader", (it) => {
  it.effect("reads every partition in offset order and stops at the end seen when it started", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(3)
      const publisher = yield* Publisher
      const first = yield* Effect.forEach([0, 1, 2, 0, 1, 0], (partition, i) =>
        request(topic, { partition, payload: `r${i}` })
      )
      yield* publisher.publish(first)
      let appended = false
      const records = yield* (yield* TopicReader).read(topic).pipe(
        // Records published while the read runs are not part of it: a replay into the same
        // topic terminates.
        Stream.tap(() =>
          appended
            ? Effect.void
            : Effect.flatMap(request(topic, { partition: 0, payload: "late" }), (late) => {
                appended = true
                return Effect.asVoid(publisher.publish([late]))
              })
        ),
        Stream.runCollect
      )
      assert.strictEqual(records.length, 6)
      for (const p of [0, 1, 2]) {
        const offsets = records.filter((r) => r.partition === p).map((r) => Number(r.offset))
        assert.deepStrictEqual(
          offsets,
          [...offsets].sort((a, b) => a - b)
        )
      }
      assert.deepStrictEqual(records.map((r) => text(r.value)).sort(), ["r0", "r1", "r2", "r3", "r4", "r5"])
    })
  )

  it.effect("an empty topic is an empty stream; a missing topic a non-retriable read error", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const reader = yield* TopicReader
      assert.strictEqual((yield* Stream.runCollect(reader.read(topic))).length, 0)
      const error = yield* Effect.flip(Stream.runCollect(reader.read(`${topic}-missing`)))
      assert.strictEqual(error._tag, "ConsumerSourceError")
      assert.strictEqual(error.operation, "read")
      assert.isFalse(error.retriable)
    })
  )
})
