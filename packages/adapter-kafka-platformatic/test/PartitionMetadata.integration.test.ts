// The publisher makes sure the producer's own metadata knows a record's partition before it sends
// (the client would fold an unknown partition onto another one): asked once per producer and topic
// for a while, not before every send, and asked again for a partition the answer did not show.
import { assert, describe, it } from "@effect/vitest"
import { Publisher } from "@effect-outbox/core/Publisher"
import { Producer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Send from "../src/internal/send.ts"
import { PlatformaticClient } from "../src/PlatformaticClient.ts"
import { namedTopic, PlatformaticTest, publishRequest, uniqueName } from "./support.ts"

/** Counts the producers' `metadata` calls while `effect` runs. */
const countingMetadata = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const original = Producer.prototype.metadata
      const calls = { n: 0 }
      Producer.prototype.metadata = function (this: Producer, ...args: Array<unknown>) {
        calls.n++
        return Reflect.apply(original, this, args)
      } as typeof original
      return { original, calls }
    }),
    ({ calls }) => Effect.map(effect, (a) => [a, calls.n] as const),
    ({ original }) =>
      Effect.sync(() => {
        Producer.prototype.metadata = original
      })
  )

const publishTo = (topic: string, partition: number, n: number) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const requests = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `k${i}`),
      (key) => Effect.map(publishRequest(topic, { key }), (r) => ({ ...r, partition }))
    )
    return (yield* publisher.publish(requests)).map((o) => {
      if (Result.isFailure(o)) throw new Error(o.failure.message)
      return o.success.partition
    })
  })

describe("the producer's partitions, asked before sending", () => {
  it.live(
    "once for many sends; again, and found, for a partition added since",
    () =>
      Effect.gen(function* () {
        const topic = uniqueName("adapter-platformatic-partitions")
        yield* namedTopic(topic, 2)
        const [landed, asked] = yield* countingMetadata(
          Effect.forEach(
            Array.from({ length: 10 }, (_, i) => i % 2),
            (p) => publishTo(topic, p, 5)
          )
        )
        assert.deepStrictEqual(
          landed.map((ps) => ps[0]),
          Array.from({ length: 10 }, (_, i) => i % 2)
        )
        // One answer per producer and topic (the first two sends may ask together), not one per send.
        assert.isAtMost(asked, 2, `${asked} metadata calls for 10 sends`)

        const client = yield* PlatformaticClient
        yield* Effect.promise(() => client.admin.createPartitions({ topics: [{ name: topic, count: 4 }] }))
        const [grown] = yield* countingMetadata(publishTo(topic, 3, 5))
        assert.deepStrictEqual(grown, [3, 3, 3, 3, 3], "the new partition, not folded onto an old one")
      }).pipe(Effect.scoped, Effect.provide(PlatformaticTest)),
    60_000
  )

  it("an answer is kept for partitionsMaxAgeMillis, then asked again", () => {
    const producer = {} as Send.AnyProducer
    assert.strictEqual(Send.knownPartitions(producer, "t", 0), 0, "nothing known before the first answer")
    Send.rememberPartitions(producer, "t", 3, 1_000)
    assert.strictEqual(Send.knownPartitions(producer, "t", 1_000 + Send.partitionsMaxAgeMillis), 3)
    assert.strictEqual(Send.knownPartitions(producer, "t", 1_001 + Send.partitionsMaxAgeMillis), 0)
    assert.strictEqual(Send.knownPartitions(producer, "u", 1_000), 0, "per topic")
    assert.strictEqual(Send.knownPartitions({} as Send.AnyProducer, "t", 1_000), 0, "per producer")
  })
})
