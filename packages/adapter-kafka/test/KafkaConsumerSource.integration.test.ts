// KafkaConsumerSource against the real broker (R4.5): batches per partition, commits only when
// asked, redelivery of whatever was not committed.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerRecord, Subscription } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaConsumerSource from "../src/KafkaConsumerSource.ts"
import { consumerOptions, freshTopic, KafkaTest, request, text } from "./support.ts"

const publish = (topic: string, partition: number, payloads: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const batch = yield* Effect.forEach(payloads, (payload) =>
      request(topic, { partition, payload, key: `k-${partition}` })
    )
    yield* (yield* Publisher).publish(batch)
  })

/** Reads `n` records; with `commit`, commits each batch before handing its records on. */
const take = (subscription: Subscription, n: number, commit: boolean) =>
  subscription.batches.pipe(
    Stream.tap((batch) => {
      assert.isTrue(batch.records.every((r) => r.topic === batch.topic && r.partition === batch.partition))
      const last = batch.records[batch.records.length - 1]!
      return commit
        ? subscription.commit([
            { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }
          ])
        : Effect.void
    }),
    Stream.flatMap((batch) => Stream.fromIterable(batch.records)),
    Stream.take(n),
    Stream.runCollect
  )

const groupOffsets = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const { admin } = yield* KafkaClient
    const [result] = yield* Effect.promise(() => admin.fetchOffsets({ groupId, topics: [topic] }))
    return Object.fromEntries(result!.partitions.map((p) => [p.partition, p.offset]))
  })

/** Publishes and fails unless every record landed (a partition just added may be unknown for a moment). */
const publishAll = (topic: string, partition: number, payloads: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const batch = yield* Effect.forEach(payloads, (payload) => request(topic, { partition, payload }))
    const outcomes = yield* (yield* Publisher).publish(batch)
    const failed = outcomes.find((o) => o._tag !== "Success")
    if (failed !== undefined) return yield* Effect.fail(failed)
  })

const values = (records: ReadonlyArray<ConsumerRecord>) => records.map((r) => text(r.value))

layer(KafkaTest, { timeout: "120 seconds", excludeTestServices: true })("KafkaConsumerSource", (it) => {
  it.effect("delivers per-partition batches in offset order; committed records are not redelivered", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["a0", "a1", "a2", "a3", "a4"])
      yield* publish(topic, 1, ["b0", "b1", "b2"])
      const source = yield* ConsumerSource
      const first = yield* Effect.scoped(
        Effect.flatMap(source.subscribe({ groupId, topics: [topic], fromBeginning: true }), (s) => take(s, 8, true))
      )
      const byPartition = (p: number) => first.filter((r) => r.partition === p)
      assert.deepStrictEqual(values(byPartition(0)), ["a0", "a1", "a2", "a3", "a4"])
      assert.deepStrictEqual(values(byPartition(1)), ["b0", "b1", "b2"])
      assert.deepStrictEqual(
        byPartition(0).map((r) => r.offset),
        ["0", "1", "2", "3", "4"]
      )
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "5", 1: "3" })

      yield* publish(topic, 0, ["a5", "a6"])
      const second = yield* Effect.scoped(
        Effect.flatMap(source.subscribe({ groupId, topics: [topic], fromBeginning: true }), (s) => take(s, 2, true))
      )
      assert.deepStrictEqual(values(second), ["a5", "a6"])
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "7", 1: "3" })
    })
  )

  it.effect(
    "on defaults, a new group reads from the start, and a topic grown while it consumes is read from its new partitions' start within seconds (H4)",
    () =>
      Effect.gen(function* () {
        const topic = yield* freshTopic(1, "grown")
        const groupId = `adapter-kafka-group-${randomUUID()}`
        yield* publish(topic, 0, ["a0", "a1"])
        const source = yield* ConsumerSource
        const seen = new Set<string>()
        const subscription = yield* source.subscribe({ groupId, topics: [topic] })
        yield* subscription.batches.pipe(
          Stream.runForEach((batch) =>
            Effect.andThen(
              Effect.sync(() => {
                for (const r of batch.records) seen.add(text(r.value))
              }),
              subscription.commit([
                {
                  topic: batch.topic,
                  partition: batch.partition,
                  offset: (BigInt(batch.records[batch.records.length - 1]!.offset) + 1n).toString()
                }
              ])
            )
          ),
          Effect.forkScoped
        )
        const waitFor = (expected: ReadonlyArray<string>, label: string) =>
          Effect.gen(function* () {
            const deadline = Date.now() + 60_000
            while (!expected.every((v) => seen.has(v))) {
              if (Date.now() > deadline) assert.fail(`${label}: saw only ${[...seen].sort().join(",")}`)
              yield* Effect.sleep("100 millis")
            }
          })
        // Written before the group existed: read from the start, not skipped.
        yield* waitFor(["a0", "a1"], "records written before the group joined")

        // Grow the topic and write to the new partitions at once, before the group can notice them.
        yield* (yield* BrokerAdmin).growPartitions(topic, 3)
        const grownAt = Date.now()
        const retry = Effect.retry({ schedule: Schedule.spaced("200 millis"), times: 50 })
        yield* publishAll(topic, 1, ["b0", "b1"]).pipe(retry)
        yield* publishAll(topic, 2, ["c0"]).pipe(retry)
        yield* waitFor(["b0", "b1", "c0"], "records on the new partitions")
        const noticedAfter = Date.now() - grownAt
        // metadataMaxAge 5 s plus a rebalance; kafkajs' own default would take up to 5 minutes.
        assert.isBelow(noticedAfter, 45_000)
        yield* Effect.logInfo(`new partitions consumed ${noticedAfter} ms after the topic grew`)
        for (let i = 0; i < 100; i++) {
          const offsets = yield* groupOffsets(groupId, topic)
          if (offsets[1] === "2" && offsets[2] === "1") break
          yield* Effect.sleep("100 millis")
        }
        assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "2", 1: "2", 2: "1" })
      })
  )

  it.effect("records after the last commit are redelivered to the next subscription (nothing lost)", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["r0", "r1", "r2", "r3", "r4"])
      const source = yield* ConsumerSource
      // Process the whole batch but commit only the first three records, then leave.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* source.subscribe({ groupId, topics: [topic], fromBeginning: true })
          const records = yield* take(subscription, 5, false)
          assert.deepStrictEqual(values(records), ["r0", "r1", "r2", "r3", "r4"])
          yield* subscription.commit([{ topic, partition: 0, offset: "3" }])
        })
      )
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "3" })
      const again = yield* Effect.scoped(
        Effect.flatMap(source.subscribe({ groupId, topics: [topic], fromBeginning: true }), (s) => take(s, 2, false))
      )
      assert.deepStrictEqual(values(again), ["r3", "r4"])
    })
  )

  it.effect("a batch the stream stopped on without committing comes back; a committed one does not", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["x0", "x1"])
      const subscription = yield* (yield* ConsumerSource).subscribe({ groupId, topics: [topic], fromBeginning: true })
      const once = yield* take(subscription, 2, false)
      const twice = yield* take(subscription, 2, false)
      assert.deepStrictEqual(values(twice), values(once))
      yield* subscription.commit([{ topic, partition: 0, offset: "2" }])
      yield* publish(topic, 0, ["x2"])
      assert.deepStrictEqual(values(yield* take(subscription, 1, false)), ["x2"])
    })
  )

  it.effect("heartbeats keep the member in the group while a batch takes longer than the session timeout", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["slow"])
      const subscription = yield* (yield* ConsumerSource).subscribe({ groupId, topics: [topic], fromBeginning: true })
      yield* subscription.batches.pipe(
        Stream.take(1),
        // The test layer's session timeout is 6 s.
        Stream.tap(() => Effect.sleep("8 seconds")),
        Stream.runDrain
      )
      yield* subscription.commit([{ topic, partition: 0, offset: "1" }])
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "1" })
    })
  )

  it.effect("a commit for a partition this member does not own is dropped, not sent", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const other = yield* freshTopic(1, "other")
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["mine"])
      const subscription = yield* (yield* ConsumerSource).subscribe({ groupId, topics: [topic], fromBeginning: true })
      yield* take(subscription, 1, false)
      yield* subscription.commit([
        { topic: other, partition: 0, offset: "5" },
        { topic, partition: 0, offset: "1" }
      ])
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "1" })
      assert.deepStrictEqual(yield* groupOffsets(groupId, other), { 0: "-1" })
    })
  )

  it.effect("two members split the partitions; together they see every record once", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      const source = yield* ConsumerSource
      const a = yield* source.subscribe({ groupId, topics: [topic], fromBeginning: true })
      const b = yield* source.subscribe({ groupId, topics: [topic], fromBeginning: true })
      const seen: Array<{ member: string; record: ConsumerRecord }> = []
      const run = (member: string, s: Subscription) =>
        s.batches.pipe(
          Stream.runForEach((batch) =>
            Effect.gen(function* () {
              for (const record of batch.records) seen.push({ member, record })
              const last = batch.records[batch.records.length - 1]!
              yield* s
                .commit([{ topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }])
                .pipe(Effect.ignore)
            })
          ),
          Effect.forkChild
        )
      const fa = yield* run("a", a)
      const fb = yield* run("b", b)
      // Wait for both members to settle on their halves before producing.
      yield* Effect.sleep("3 seconds")
      yield* publish(topic, 0, ["p0-0", "p0-1", "p0-2"])
      yield* publish(topic, 1, ["p1-0", "p1-1"])
      const deadline = Date.now() + 30_000
      while (new Set(seen.map((s) => `${s.record.partition}:${s.record.offset}`)).size < 5 && Date.now() < deadline) {
        yield* Effect.sleep("100 millis")
      }
      yield* Fiber.interrupt(fa)
      yield* Fiber.interrupt(fb)
      assert.deepStrictEqual([...new Set(seen.map((s) => text(s.record.value)))].sort(), [
        "p0-0",
        "p0-1",
        "p0-2",
        "p1-0",
        "p1-1"
      ])
      const owners = (p: number) => new Set(seen.filter((s) => s.record.partition === p).map((s) => s.member))
      assert.strictEqual(owners(0).size, 1)
      assert.strictEqual(owners(1).size, 1)
      assert.notDeepEqual([...owners(0)], [...owners(1)])
      assert.deepStrictEqual(yield* groupOffsets(groupId, topic), { 0: "3", 1: "2" })
    })
  )

  it.effect("a member holding a batch its stream has not taken yet lets a rebalance through at once", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const groupId = `adapter-kafka-group-${randomUUID()}`
      yield* publish(topic, 0, ["p0-a", "p0-b"])
      yield* publish(topic, 1, ["p1-a", "p1-b"])
      const { kafka } = yield* KafkaClient
      // A long rebalance timeout: without the withdrawal the join below would wait for it.
      const options = { ...consumerOptions, sessionTimeoutMillis: 10_000, rebalanceTimeoutMillis: 30_000 }
      const a = yield* KafkaConsumerSource.subscribe(kafka, { groupId, topics: [topic], fromBeginning: true }, options)
      yield* Effect.sleep("2 seconds") // A owns both partitions and has a batch waiting, untaken
      const started = Date.now()
      const b = yield* KafkaConsumerSource.subscribe(kafka, { groupId, topics: [topic], fromBeginning: true }, options)
      const fromB = yield* b.batches.pipe(Stream.take(1), Stream.runCollect)
      const waited = Date.now() - started
      assert.isBelow(waited, 15_000, `the second member got its first batch after ${waited} ms`)
      const bPartition = fromB[0]!.partition
      // Nothing is lost: A, pulling now, gets the other partition's records.
      const fromA = yield* a.batches.pipe(
        Stream.filter((batch) => batch.partition !== bPartition),
        Stream.flatMap((batch) => Stream.fromIterable(batch.records)),
        Stream.take(2),
        Stream.runCollect
      )
      assert.deepStrictEqual(values(fromA), bPartition === 0 ? ["p1-a", "p1-b"] : ["p0-a", "p0-b"])
    })
  )
})
