// The publisher's layout cache over a fake driver: when metadata is read again, what a growth
// triggers, and where each request goes.
import { assert, describe, it } from "@effect/vitest"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import type { KafkaDriver } from "../src/KafkaDriver.ts"
import * as KafkaProtocol from "../src/KafkaProtocol.ts"
import * as Layouts from "../src/Layouts.ts"

const fakeDriver = (topics: Map<string, number>) => {
  const reads: Array<string> = []
  const unknown = Object.assign(new Error("unknown topic"), { names: ["UNKNOWN_TOPIC_OR_PARTITION"] })
  const driver = {
    protocol: KafkaProtocol.make(
      (error) => ({
        protocol: new Set((error as { names?: Array<string> }).names ?? []),
        clientOutage: false,
        retriable: false
      }),
      String
    ),
    metadata: async (topic: string) => {
      reads.push(topic)
      const count = topics.get(topic)
      if (count === undefined) throw unknown
      return { partitions: count, leaders: Array.from({ length: count }, (_, i) => i % 2) }
    }
  } as unknown as KafkaDriver
  return { driver, reads }
}

const request = (topic: string, partition: number | null, key: string | null = null): PublishRequest => ({
  id: "0193a0b4-5c6d-7e8f-9a0b-000000000001" as EventId,
  topic,
  key,
  partition,
  headers: {},
  payload: new Uint8Array(1)
})

describe("Layouts", () => {
  it.effect("a cached layout serves until a request names a partition it lacks; a growth is reported", () =>
    Effect.gen(function* () {
      const topics = new Map([["orders", 2]])
      const fake = fakeDriver(topics)
      let grown = 0
      const layouts = yield* Layouts.make(fake.driver, 60_000, () => grown++)
      const first = yield* layouts.layoutFor("orders", [request("orders", 1)])
      yield* layouts.layoutFor("orders", [request("orders", null, "k")])
      assert.strictEqual(first?.partitions, 2)
      assert.deepStrictEqual(fake.reads, ["orders"])
      topics.set("orders", 4)
      const after = yield* layouts.layoutFor("orders", [request("orders", 3)])
      assert.strictEqual(after?.partitions, 4)
      assert.deepStrictEqual(fake.reads, ["orders", "orders"])
      assert.strictEqual(grown, 1)
    })
  )

  it.effect("a missing topic reads as undefined and is asked again next time; its requests are rejected", () =>
    Effect.gen(function* () {
      const fake = fakeDriver(new Map())
      const layouts = yield* Layouts.make(fake.driver, 60_000, () => undefined)
      const missing = yield* layouts.layoutFor("gone", [request("gone", null)])
      assert.isUndefined(missing)
      const target = layouts.target(request("gone", null), missing)
      assert.strictEqual(target._tag === "Reject" && target.error._tag, "PermanentPublishError")
      yield* layouts.layoutFor("gone", [request("gone", null)])
      assert.deepStrictEqual(fake.reads, ["gone", "gone"])
    })
  )

  it.effect("an explicit partition is kept or refused; unkeyed records go round robin, with their leader", () =>
    Effect.gen(function* () {
      const layouts = yield* Layouts.make(fakeDriver(new Map([["t", 3]])).driver, 60_000, () => undefined)
      const layout = yield* layouts.layoutFor("t", [])
      const outOfRange = layouts.target(request("t", 3), layout)
      assert.strictEqual(outOfRange._tag === "Reject" && outOfRange.error._tag, "UnknownPartitionError")
      const spread = [0, 1, 2, 3].map((i) => layouts.target({ ...request("t", null), id: `${i}` as EventId }, layout))
      assert.deepStrictEqual(
        spread.map((t) => (t._tag === "Send" ? [t.partition, t.leader] : [])),
        [
          [0, 0],
          [1, 1],
          [2, 0],
          [0, 0]
        ]
      )
    })
  )
})
