// Dead letters on the real broker (R5): the core consumer dead-letters a poison record to
// `<topic>.DLT` through KafkaPublisher, and DeadLetter.replay reads it back with
// KafkaTopicReader and republishes it; the consumer then processes it exactly once.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Inbox from "@effect-outbox/core/Inbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { KafkaClient } from "../src/KafkaClient.ts"
import { freshTopic, KafkaTest, namedTopic, request } from "./support.ts"

const Order = Schema.Struct({ n: Schema.Number })

class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", {
  n: Schema.Number,
  retriable: Schema.Boolean
}) {}

const Live = Layer.mergeAll(Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)), KafkaTest)

const committed = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    const [result] = yield* Effect.promise(() => admin.fetchOffsets({ groupId, topics: [topic] }))
    return result!.partitions.find((p) => p.partition === 0)?.offset
  })

const eventually = <E, R>(label: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      if (yield* check) return
      yield* Effect.sleep("100 millis")
    }
    assert.fail(`timed out waiting until ${label}`)
  })

layer(Live, { timeout: "120 seconds", excludeTestServices: true })("dead letters on Kafka", (it) => {
  it.effect("a poison record goes to <topic>.DLT with its key, headers and payload; replay brings it back once", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1, "orders")
      const dlt = DeadLetter.defaultTopic(topic)
      yield* namedTopic(dlt, 1)

      const sent = yield* Effect.forEach([1, 2, 3], (n) =>
        request(topic, { key: `k${n}`, partition: 0, payload: "", headers: {} }).pipe(
          Effect.map((r) => ({ ...r, payload: jsonPayload({ n }) }))
        )
      )
      yield* (yield* Publisher).publish(sent)

      const broken = yield* Ref.make(true)
      const processed = yield* Ref.make<ReadonlyArray<number>>([])
      const groupId = `adapter-kafka-dlt-${randomUUID()}`
      yield* Consumer.make({
        groupId,
        topics: [topic],
        schema: Order,
        fromBeginning: true,
        maxAttempts: 1,
        retrySchedule: Schedule.spaced("100 millis"),
        handler: (m) =>
          Effect.flatMap(Ref.get(broken), (b) =>
            b && m.payload.n === 1
              ? Effect.fail(new HandlerFailed({ n: 1, retriable: false }))
              : Ref.update(processed, (all) => [...all, m.payload.n])
          )
      })
      yield* eventually(
        "offset 3 is committed",
        Effect.map(committed(groupId, topic), (o) => o === "3")
      )
      assert.deepStrictEqual(yield* Ref.get(processed), [2, 3])

      const letters = yield* (yield* TopicReader).read(dlt).pipe(Stream.runCollect)
      assert.strictEqual(letters.length, 1)
      const letter = DeadLetter.parse(letters[0]!)
      assert.isTrue(Option.isSome(letter))
      if (Option.isSome(letter)) {
        assert.strictEqual(letter.value.originalTopic, topic)
        assert.strictEqual(letter.value.originalOffset, "0")
        assert.strictEqual(letter.value.eventId, sent[0]!.id)
        assert.strictEqual(letter.value.errorClass, "HandlerFailed")
        assert.strictEqual(letter.value.consumerGroup, groupId)
      }
      assert.strictEqual(letters[0]!.key, "k1")
      assert.deepStrictEqual([...letters[0]!.value], [...jsonPayload({ n: 1 })])

      yield* Ref.set(broken, false)
      const result = yield* DeadLetter.replay({ from: dlt })
      assert.strictEqual(result.replayed.length, 1)
      assert.deepStrictEqual(result.failed, [])
      yield* eventually(
        "the replayed record is processed",
        Effect.map(Ref.get(processed), (all) => all.length === 3)
      )
      assert.deepStrictEqual(yield* Ref.get(processed), [2, 3, 1])

      // A second replay publishes again; the consumer deduplicates by event id.
      yield* DeadLetter.replay({ from: dlt })
      yield* eventually(
        "offset 5 is committed",
        Effect.map(committed(groupId, topic), (o) => o === "5")
      )
      assert.deepStrictEqual(yield* Ref.get(processed), [2, 3, 1])
    })
  )

  it.effect(
    "replay keeps the original identity: no event id invented, the offset identity is the original's (M8)",
    () =>
      Effect.gen(function* () {
        const topic = yield* freshTopic(1, "orders")
        const dlt = DeadLetter.defaultTopic(topic)
        yield* namedTopic(dlt, 1)
        // A record from a producer that writes no event id.
        const original = yield* request(topic, { key: "k1", partition: 0, payload: "", headers: {} })
        yield* (yield* Publisher).publish([
          { ...original, headers: {}, payload: jsonPayload({ n: 1 }), writeEventId: false }
        ])

        const broken = yield* Ref.make(true)
        const processed = yield* Ref.make<ReadonlyArray<string>>([])
        const groupId = `adapter-kafka-dlt-identity-${randomUUID()}`
        yield* Consumer.make({
          groupId,
          topics: [topic],
          schema: Order,
          identity: "offset",
          fromBeginning: true,
          maxAttempts: 1,
          handler: (m) =>
            Effect.flatMap(Ref.get(broken), (b) =>
              b
                ? Effect.fail(new HandlerFailed({ n: 1, retriable: false }))
                : Ref.update(processed, (all) => [...all, m.idempotencyKey])
            )
        })
        yield* eventually(
          "the record is dead-lettered",
          Effect.map(committed(groupId, topic), (o) => o === "1")
        )
        const reader = yield* TopicReader
        const [letter] = yield* reader.read(dlt).pipe(Stream.runCollect)
        assert.isUndefined(letter!.headers["event-id"])

        yield* Ref.set(broken, false)
        yield* DeadLetter.replay({ from: dlt })
        yield* eventually(
          "the replay is processed",
          Effect.map(Ref.get(processed), (all) => all.length === 1)
        )
        assert.deepStrictEqual(yield* Ref.get(processed), [`offset:${topic}/0/0`])
        const onTopic = yield* reader.read(topic).pipe(Stream.runCollect)
        assert.isUndefined(onTopic[1]!.headers["event-id"], "no event id invented on replay")

        // Replayed again: the same identity, so it is not handled again.
        yield* DeadLetter.replay({ from: dlt })
        yield* eventually(
          "offset 3 is committed",
          Effect.map(committed(groupId, topic), (o) => o === "3")
        )
        assert.deepStrictEqual(yield* Ref.get(processed), [`offset:${topic}/0/0`])
      })
  )
})
