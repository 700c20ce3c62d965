import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ConsumerRecord } from "../src/ConsumerSource.ts"
import * as DeadLetter from "../src/DeadLetter.ts"

const eventId = "0190a0a0-0000-7000-8000-000000000001"
const record: ConsumerRecord = {
  topic: "orders",
  partition: 2,
  offset: "17",
  key: "user-1",
  headers: { "event-id": eventId, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
  value: new Uint8Array([1, 2, 3]),
  timestamp: 1000
}

describe("DeadLetter", () => {
  it("names the dead-letter topic <topic>.DLT by default", () => {
    assert.strictEqual(DeadLetter.defaultTopic("orders"), "orders.DLT")
  })

  it.effect("a dead letter keeps key, headers and payload and adds the diagnostics", () =>
    Effect.gen(function* () {
      const request = yield* DeadLetter.toPublishRequest(record, "orders.DLT", {
        error: { _tag: "HandlerFailed", message: "card declined" },
        attempts: 3,
        classification: "transient",
        consumerGroup: "billing"
      })
      assert.strictEqual(request.id, eventId)
      assert.strictEqual(request.topic, "orders.DLT")
      assert.strictEqual(request.key, "user-1")
      assert.deepStrictEqual(request.payload, record.value)
      assert.strictEqual(request.headers["event-id"], eventId)
      assert.strictEqual(request.headers.traceparent, record.headers.traceparent)
      assert.strictEqual(request.headers[DeadLetter.headers.originalTopic], "orders")
      assert.strictEqual(request.headers[DeadLetter.headers.originalPartition], "2")
      assert.strictEqual(request.headers[DeadLetter.headers.originalOffset], "17")
      assert.strictEqual(request.headers[DeadLetter.headers.errorClass], "HandlerFailed")
      assert.strictEqual(request.headers[DeadLetter.headers.errorMessage], "card declined")
      assert.strictEqual(request.headers[DeadLetter.headers.attempts], "3")
      assert.strictEqual(request.headers[DeadLetter.headers.consumerGroup], "billing")
    })
  )

  it.effect("parse reads the diagnostics back; replay strips them, keeps the event id and counts the attempt", () =>
    Effect.gen(function* () {
      const request = yield* DeadLetter.toPublishRequest(record, "orders.DLT", {
        error: new Error("boom"),
        attempts: 1,
        classification: "permanent",
        consumerGroup: "billing"
      })
      const onDlt: ConsumerRecord = {
        ...record,
        topic: "orders.DLT",
        partition: 0,
        offset: "5",
        headers: request.headers
      }
      const letter = Option.getOrThrow(DeadLetter.parse(onDlt))
      assert.strictEqual(letter.originalTopic, "orders")
      assert.strictEqual(letter.originalPartition, 2)
      assert.strictEqual(letter.errorClass, "Error")
      assert.strictEqual(letter.replayAttempt, 0)
      const replay = yield* DeadLetter.toReplayRequest(letter)
      assert.strictEqual(replay.topic, "orders")
      assert.strictEqual(replay.partition, 2)
      assert.strictEqual(replay.id, eventId)
      assert.strictEqual(replay.headers["event-id"], eventId)
      assert.strictEqual(replay.headers[DeadLetter.headers.replayAttempt], "1")
      assert.isUndefined(replay.headers[DeadLetter.headers.errorClass])
      assert.isUndefined(replay.headers[DeadLetter.headers.originalOffset])
      // dead-lettered again after the replay: the next replay counts on
      const again = yield* DeadLetter.toPublishRequest({ ...record, headers: replay.headers }, "orders.DLT", {
        error: new Error("boom"),
        attempts: 1,
        classification: "permanent",
        consumerGroup: "billing"
      })
      const second = Option.getOrThrow(DeadLetter.parse({ ...onDlt, headers: again.headers }))
      assert.strictEqual(second.replayAttempt, 1)
      assert.strictEqual((yield* DeadLetter.toReplayRequest(second)).headers[DeadLetter.headers.replayAttempt], "2")
      // to another topic: routed by key, not to the original partition
      assert.strictEqual((yield* DeadLetter.toReplayRequest(letter, "orders.retry")).partition, null)
    })
  )

  it("a record without dlt headers is not a dead letter", () => {
    assert.isTrue(Option.isNone(DeadLetter.parse(record)))
  })
})
