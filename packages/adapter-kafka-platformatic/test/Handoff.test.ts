// The adapter's hold-back of paused partitions (internal/handoff.ts), on a fake stream: the
// client can pause only its whole stream, so the adapter pauses it when too many records of
// paused partitions wait, and must resume it once they are gone — also when a group join drops
// them all at once.
import { EventEmitter } from "node:events"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  type AnyConsumer,
  fetchedByThisMember,
  makeState,
  type RawStream,
  reader,
  setPaused
} from "../src/internal/handoff.ts"
import type { RawMessage } from "../src/internal/records.ts"

const message = (partition: number, offset: number, generationId = 1): RawMessage =>
  ({
    metadata: { consumer: { groupId: "g", memberId: "m", generationId, coordinatorId: 1 } },
    topic: "t",
    partition,
    offset: BigInt(offset),
    key: null,
    value: Buffer.from("v"),
    headers: new Map(),
    timestamp: 0n
  }) as unknown as RawMessage

/** A stream that hands out `queue` one record per `read()`, and records pause/resume calls. */
const fakeStream = (queue: Array<RawMessage>) => {
  const calls: Array<"pause" | "resume"> = []
  const stream = {
    read: () => queue.shift() ?? null,
    pause: () => calls.push("pause"),
    resume: () => calls.push("resume")
  }
  return { stream: stream as unknown as RawStream, calls }
}

describe("platformatic hand-off", () => {
  it("pauses the stream when too many records of a paused partition wait, resumes once they are taken", () => {
    const consumer = new EventEmitter() as unknown as AnyConsumer
    const state = makeState(consumer)
    Effect.runSync(setPaused(state, [{ topic: "t", partition: 0 }], true))
    const { stream, calls } = fakeStream([0, 1, 2, 3, 4].map((o) => message(0, o)))
    const read = reader(stream, state, 10, 2)
    assert.isUndefined(read())
    assert.deepStrictEqual(calls, ["pause"])
    Effect.runSync(setPaused(state, [{ topic: "t", partition: 0 }], false))
    const batch = read()
    assert.deepStrictEqual(
      batch?.records.map((r) => r.offset),
      ["0", "1", "2", "3", "4"]
    )
    assert.deepStrictEqual(calls, ["pause", "resume"])
  })

  it("a group join that drops the held records resumes the stream it paused", () => {
    const consumer = new EventEmitter()
    const state = makeState(consumer as unknown as AnyConsumer)
    Effect.runSync(setPaused(state, [{ topic: "t", partition: 0 }], true))
    const queue = [0, 1, 2, 3].map((o) => message(0, o))
    const { stream, calls } = fakeStream(queue)
    const read = reader(stream, state, 10, 2)
    assert.isUndefined(read())
    assert.deepStrictEqual(calls, ["pause"])
    // The rebalance: the client restarts from the committed offsets, the held records go.
    consumer.emit("consumer:group:join")
    assert.strictEqual(state.heldCount, 0)
    queue.push(message(1, 7))
    const batch = read()
    assert.deepStrictEqual(calls, ["pause", "resume"])
    assert.deepStrictEqual(
      batch?.records.map((r) => [r.partition, r.offset]),
      [[1, "7"]]
    )
  })

  it("a batch never spans records fetched before and after a group join", () => {
    // The member kept partition 2 across a join. Its stream still buffers 12 records fetched
    // under generation 1 (288..299) when those fetched again under generation 2 from the
    // committed offset 250 arrive behind them. One batch of 25 would carry generation 1, be
    // dropped as stale, and take 250..262 with it: the stream has moved past them for good.
    const consumer = Object.assign(new EventEmitter(), {
      generationId: 1,
      assignments: [{ topic: "t", partitions: [2] }]
    })
    const state = makeState(consumer as unknown as AnyConsumer)
    const stale = Array.from({ length: 12 }, (_, i) => message(2, 288 + i, 1))
    const fresh = Array.from({ length: 25 }, (_, i) => message(2, 250 + i, 2))
    consumer.generationId = 2
    consumer.emit("consumer:group:join")
    const { stream } = fakeStream([...stale, ...fresh])
    const read = reader(stream, state, 25, 100)
    const current = fetchedByThisMember(consumer as unknown as AnyConsumer, state)
    const batches = [read(), read()].map((b) => ({
      offsets: b?.records.map((r) => Number(r.offset)),
      current: b !== undefined && current(b)
    }))
    assert.deepStrictEqual(batches, [
      { offsets: stale.map((m) => Number(m.offset)), current: false },
      { offsets: fresh.map((m) => Number(m.offset)), current: true }
    ])
  })
})
