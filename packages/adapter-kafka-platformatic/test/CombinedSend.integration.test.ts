// A publish call's partitions go in one `send` when they fit (one produce request per broker);
// `combinePartitions: false` keeps one per partition. A combined send that fails is sent again per
// partition on a fresh producer: every record lands, none is lost.
import { assert, describe, it } from "@effect/vitest"
import { Publisher } from "@effect-outbox/core/Publisher"
import { Producer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as PlatformaticKafkaOutbox from "../src/PlatformaticKafkaOutbox.ts"
import { brokers, namedTopic, publishRequest, uniqueName } from "./support.ts"

/** Runs `effect` with the producers' `send` counted by the number of partitions each carried, failing the calls `fail` picks. */
const watchingSends = <A, E, R>(effect: Effect.Effect<A, E, R>, fail: (partitions: number, call: number) => boolean) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const original = Producer.prototype.send
      const sends: Array<number> = []
      Producer.prototype.send = function (this: Producer, ...args: Array<unknown>) {
        const options = args[0] as { readonly messages: ReadonlyArray<{ readonly partition?: number }> }
        const partitions = new Set(options.messages.map((m) => m.partition)).size
        sends.push(partitions)
        if (fail(partitions, sends.length)) return Promise.reject(new Error("injected: the combined send failed"))
        return Reflect.apply(original, this, args)
      } as typeof original
      return { original, sends }
    }),
    ({ sends }) => Effect.map(effect, (a) => [a, sends] as const),
    ({ original }) =>
      Effect.sync(() => {
        Producer.prototype.send = original
      })
  )

const publishKeys = (topic: string, n: number) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const requests = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => `user-${i}`),
      (key) => publishRequest(topic, { key })
    )
    return (yield* publisher.publish(requests)).map((o) => {
      if (Result.isFailure(o)) throw new Error(o.failure.message)
      return o.success
    })
  })

const layer = (combinePartitions?: boolean) =>
  PlatformaticKafkaOutbox.layer({ brokers, clientId: "combined-send-test" }, { publisher: { combinePartitions } })

describe("a publish call's partitions in one send", () => {
  it.live(
    "one send for three partitions; one per partition with combinePartitions: false",
    () =>
      Effect.gen(function* () {
        const topic = yield* namedTopic(uniqueName("adapter-platformatic-combined"), 3)
        yield* publishKeys(topic, 3) // metadata and producer warm
        const [receipts, sends] = yield* watchingSends(publishKeys(topic, 30), () => false)
        assert.deepStrictEqual(sends, [3], "one send carrying the three partitions")
        assert.strictEqual(new Set(receipts.map((r) => r.partition)).size, 3)
        const [, apart] = yield* watchingSends(publishKeys(topic, 30), () => false).pipe(Effect.provide(layer(false)))
        assert.deepStrictEqual(apart, [1, 1, 1], "one send per partition")
      }).pipe(Effect.scoped, Effect.provide(layer())),
    60_000
  )

  it.live(
    "a combined send that fails: sent again per partition, every record acknowledged in order",
    () =>
      Effect.gen(function* () {
        const topic = yield* namedTopic(uniqueName("adapter-platformatic-combined-fail"), 3)
        yield* publishKeys(topic, 3)
        const [receipts, sends] = yield* watchingSends(
          publishKeys(topic, 30),
          (partitions, call) => call === 1 && partitions > 1
        )
        assert.deepStrictEqual(sends, [3, 1, 1, 1], "the combined send, then one per partition")
        assert.strictEqual(receipts.length, 30)
        // Per partition, receipts in request order have increasing offsets.
        for (const partition of [0, 1, 2]) {
          const offsets = receipts.filter((r) => r.partition === partition).map((r) => BigInt(r.offset))
          assert.deepStrictEqual(
            offsets,
            [...offsets].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
          )
        }
      }).pipe(Effect.scoped, Effect.provide(layer())),
    60_000
  )
})
