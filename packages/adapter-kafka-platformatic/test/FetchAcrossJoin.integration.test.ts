// A fetch in flight across a group join, on the real broker. The client sends a fetch from the
// position it holds; when the answer comes after a join it stamps the records with the new
// generation and moves the position past them, although the join had just reset it to the group's
// committed offset. Forced here: the answer to one fetch is held until the member rejoined (it
// joins the group again, which starts a rebalance) and its stream reset the partition to the
// committed offset, then released. The records after the committed offset must come again, from it, in order; without the
// guard the member went on from the held answer and never saw the records in between (this is how
// the transactional pipeline lost outputs across a rebalance).
import { assert, layer } from "@effect/vitest"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import { Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import { brokers, consumerOptions, namedTopic, publishRequest, uniqueName } from "./support.ts"

type Callback = (error: unknown, response?: unknown) => void
type Method = (this: unknown, options: unknown, callback?: Callback) => unknown

const hasRecords = (response: unknown) =>
  (
    response as { responses?: ReadonlyArray<{ partitions: ReadonlyArray<{ records?: ReadonlyArray<unknown> }> }> }
  ).responses?.some((t) => t.partitions.some((p) => (p.records?.length ?? 0) > 0)) === true

/**
 * Holds the answer of the fetch after `pass` fetches that returned records (and names its
 * consumer), until the test calls `held`; and
 * counts the committed-offset reads a stream makes when it (re)starts its partitions. Patches the
 * client's prototype (every consumer made from now on) until the returned `restore`.
 */
const holdOneFetch = (pass: number) => {
  const proto = Consumer.prototype as unknown as { fetch: Method; listCommittedOffsets: Method }
  const fetch = proto.fetch
  const listCommittedOffsets = proto.listCommittedOffsets
  const gate = {
    passed: 0,
    held: undefined as (() => void) | undefined,
    consumer: undefined as Consumer | undefined,
    committedReads: 0
  }
  proto.fetch = function (options, callback) {
    if (typeof callback !== "function") return fetch.call(this, options)
    return fetch.call(this, options, (error, response) => {
      if (!error && hasRecords(response) && gate.passed++ === pass) {
        gate.consumer = this as Consumer
        gate.held = () => callback(error, response)
        return
      }
      callback(error, response)
    })
  }
  proto.listCommittedOffsets = function (options, callback) {
    if (typeof callback !== "function") return listCommittedOffsets.call(this, options)
    return listCommittedOffsets.call(this, options, (error, response) => {
      callback(error, response)
      gate.committedReads++
    })
  }
  const restore = () => {
    proto.fetch = fetch
    proto.listCommittedOffsets = listCommittedOffsets
  }
  return { gate, restore }
}

const until = (what: string, check: () => boolean) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("20 millis")
    }
  })

// One record per fetch (the broker returns the first record batch when it exceeds the limit), so
// the held answer is one record ahead of those delivered before it.
const OneRecordPerFetch = PlatformaticKafkaOutbox.layer(
  { brokers, clientId: "adapter-platformatic-fetch-join" },
  { consumer: { ...consumerOptions, maxBytesPerPartition: 1, maxBatchRecords: 1 } }
)

layer(OneRecordPerFetch, { timeout: "120 seconds", excludeTestServices: true })(
  "a fetch answered after a group join",
  (it) => {
    it.effect("does not move the position past the group's committed offset: the records after it come again", () =>
      Effect.gen(function* () {
        const topic = yield* namedTopic(uniqueName("adapter-platformatic-fetch-join"), 1)
        const groupId = uniqueName("adapter-platformatic-fetch-join")
        const publisher = yield* Publisher
        // One produce request, so one record batch, per record.
        for (let i = 0; i < 20; i++) yield* publisher.publish([yield* publishRequest(topic)])

        const { gate, restore } = holdOneFetch(10)
        yield* Effect.addFinalizer(() => Effect.sync(restore))
        const subscription = yield* (yield* ConsumerSource).subscribe({ groupId, topics: [topic], fromBeginning: true })
        const taken: Array<{ readonly offset: number; readonly generation: number | undefined; current: boolean }> = []
        const fiber = yield* subscription.batches.pipe(
          Stream.runForEach((batch) =>
            Effect.sync(() => {
              const generation = subscription.groupMetadata?.(batch)?.generationId
              const current = subscription.isCurrent(batch)
              for (const r of batch.records) taken.push({ offset: Number(r.offset), generation, current })
            })
          ),
          Effect.forkScoped
        )
        // Records 0..9 delivered; the answer with record 10 is held.
        yield* until("the held fetch", () => gate.held !== undefined && taken.length === 10)
        const before = taken[0]!.generation
        yield* subscription.commit([{ topic, partition: 0, offset: "3" }])

        // The member joins again (the group's only member, so it keeps its partition): a new
        // generation, and its stream restarts the partition at the committed offset 3.
        const reads = gate.committedReads
        yield* Effect.promise(() =>
          gate.consumer!.joinGroup({ sessionTimeout: 6_000, rebalanceTimeout: 6_000, heartbeatInterval: 500 })
        )
        yield* until("the member's restart at the committed offset", () => gate.committedReads > reads)

        gate.held!()
        yield* until("the last record under the new generation", () =>
          taken.some((t) => t.offset === 19 && t.generation !== before)
        )
        yield* Fiber.interrupt(fiber)

        const after = taken.filter((t) => t.generation !== before)
        assert.isTrue(
          after.every((t) => t.current),
          "every record of the new generation is current"
        )
        assert.deepStrictEqual(
          after.map((t) => t.offset),
          Array.from({ length: 17 }, (_, i) => i + 3),
          "after the join the partition starts again at the committed offset, with no gap"
        )
      })
    )
  }
)
