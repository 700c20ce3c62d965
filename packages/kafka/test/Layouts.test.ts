// The publisher's layout cache over a fake driver: when metadata is read again, what a growth
// triggers, and where each request goes.
import { assert, describe, it } from "@effect/vitest"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import type { KafkaDriver } from "../src/KafkaDriver.ts"
import * as KafkaProtocol from "../src/KafkaProtocol.ts"
import * as Layouts from "../src/Layouts.ts"

const fakeDriver = (topics: Map<string, number>, outage: { failing: boolean } = { failing: false }) => {
  const reads: Array<string> = []
  const unknown = Object.assign(new Error("unknown topic"), { names: ["UNKNOWN_TOPIC_OR_PARTITION"] })
  const leaderless = Object.assign(new Error("no leader"), { names: ["LEADER_NOT_AVAILABLE"] })
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
      if (outage.failing) throw leaderless
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

  it.effect("a read failing with an outage serves the last good layout; partitions that failed wait", () =>
    Effect.gen(function* () {
      const outage = { failing: false }
      // maxAge 0: every call reads again
      const layouts = yield* Layouts.make(fakeDriver(new Map([["t", 4]]), outage).driver, 0, () => undefined)
      const healthy = yield* layouts.layoutFor("t", [])
      layouts.noteUnavailable("t", 2)
      assert.strictEqual(layouts.target(request("t", 2), healthy)._tag, "Send", "a clean layout sends everywhere")
      outage.failing = true
      const stale = yield* layouts.layoutFor("t", [])
      assert.strictEqual(stale?.stale, true)
      assert.strictEqual(stale?.partitions, 4)
      const refused = layouts.target(request("t", 2), stale)
      assert.strictEqual(refused._tag === "Reject" && refused.error._tag, "BrokerUnavailableError")
      assert.deepStrictEqual(
        [0, 1, 3].map((p) => layouts.target(request("t", p), stale)._tag),
        ["Send", "Send", "Send"]
      )
      // A clean read forgets the partitions that failed.
      outage.failing = false
      const back = yield* layouts.layoutFor("t", [])
      assert.isUndefined(back?.stale)
      outage.failing = true
      const again = yield* layouts.layoutFor("t", [])
      assert.strictEqual(layouts.target(request("t", 2), again)._tag, "Send")
    })
  )

  it.effect("partitions a driver reports leaderless are refused as unavailable, the others sent", () =>
    Effect.gen(function* () {
      const layouts = yield* Layouts.make(fakeDriver(new Map()).driver, 60_000, () => undefined)
      const layout = { partitions: 3, leaders: [1, -1, 3], leaderless: [1] }
      assert.deepStrictEqual(
        [0, 1, 2].map((p) => {
          const t = layouts.target(request("t", p), layout)
          return t._tag === "Send" ? "Send" : t.error._tag
        }),
        ["Send", "BrokerUnavailableError", "Send"]
      )
    })
  )

  it.effect("an outage before any good read is an error, not a layout", () =>
    Effect.gen(function* () {
      const layouts = yield* Layouts.make(
        fakeDriver(new Map([["t", 2]]), { failing: true }).driver,
        60_000,
        () => undefined
      )
      const result = yield* Effect.result(layouts.layoutFor("t", []))
      assert.strictEqual(result._tag, "Failure")
    })
  )
})
