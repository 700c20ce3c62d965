// A fetch sent before a group join (or while one runs) and answered after it carries records from
// the previous generation's positions; the client would stamp them with the new generation and
// move its position past them, skipping the records between the group's committed offset and that
// old position. The guard empties such answers; answers within one membership pass untouched.
import { EventEmitter } from "node:events"
import { assert, describe, it } from "@effect/vitest"
import { guardFetch } from "../src/internal/fetchGuard.ts"
import { type AnyConsumer, makeState } from "../src/internal/handoff.ts"

type Callback = (error: unknown, response?: unknown) => void

/** A consumer whose fetches wait until the test answers them, and whose joins the test drives. */
const fakeConsumer = () => {
  const pending: Array<Callback> = []
  const consumer = Object.assign(new EventEmitter(), {
    generationId: 0,
    memberId: null as string | null,
    fetch: (_options: unknown, callback: Callback) => {
      pending.push(callback)
    }
  })
  /** The client's classic join: new generation and member id at JoinGroup, the event after SyncGroup. */
  const joinGroupResponse = (generationId: number) => {
    consumer.generationId = generationId
    consumer.memberId = "member-1"
  }
  const joined = () => consumer.emit("consumer:group:join")
  const any = consumer as unknown as AnyConsumer
  const state = makeState(any)
  guardFetch(any, state)
  const fetch = (options: unknown = {}) => {
    const delivered: Array<Array<bigint>> = []
    ;(any.fetch as unknown as (options: unknown, callback: Callback) => void)(options, (_error, response) => {
      const r = response as Response
      delivered.push(r.responses.flatMap((t) => t.partitions.flatMap((p) => p.records.map((b) => b.firstOffset))))
    })
    const answer = pending.pop()
    return { answer: (...offsets: Array<number>) => answer?.(null, response(offsets)), delivered }
  }
  return { joinGroupResponse, joined, fetch, pending }
}

interface Response {
  readonly responses: ReadonlyArray<{
    readonly partitions: ReadonlyArray<{ readonly records: ReadonlyArray<{ readonly firstOffset: bigint }> }>
  }>
}

const response = (offsets: ReadonlyArray<number>): Response => ({
  responses: [{ partitions: [{ records: offsets.map((o) => ({ firstOffset: BigInt(o) })) }] }]
})

describe("platformatic fetch guard", () => {
  it("delivers an answer fetched and answered within one membership", () => {
    const c = fakeConsumer()
    c.joinGroupResponse(1)
    c.joined()
    const f = c.fetch()
    f.answer(263, 264)
    assert.deepStrictEqual(f.delivered, [[263n, 264n]])
  })

  it("empties an answer to a fetch sent before a join that completed meanwhile", () => {
    const c = fakeConsumer()
    c.joinGroupResponse(1)
    c.joined()
    const f = c.fetch()
    c.joinGroupResponse(2)
    c.joined()
    f.answer(263, 264)
    assert.deepStrictEqual(f.delivered, [[]])
  })

  it("empties an answer that arrives between JoinGroup and the join event", () => {
    const c = fakeConsumer()
    c.joinGroupResponse(1)
    c.joined()
    const f = c.fetch()
    c.joinGroupResponse(2)
    f.answer(263)
    assert.deepStrictEqual(f.delivered, [[]])
  })

  it("empties an answer to a fetch sent while a join ran (new generation, old positions)", () => {
    const c = fakeConsumer()
    c.joinGroupResponse(1)
    c.joined()
    c.joinGroupResponse(2)
    const f = c.fetch()
    f.answer(263)
    c.joined()
    const g = c.fetch()
    g.answer(250)
    assert.deepStrictEqual(f.delivered, [[]])
    assert.deepStrictEqual(g.delivered, [[250n]])
  })

  it("answers a fetch built while a join cleared the positions with nothing, without sending it", async () => {
    const c = fakeConsumer()
    c.joinGroupResponse(1)
    c.joined()
    // The stream built this request after the join forgot partition 1's position.
    const f = c.fetch({
      topics: [{ topicId: "t", partitions: [{ partition: 0, fetchOffset: 5n }, { partition: 1 }] }]
    })
    assert.strictEqual(c.pending.length, 0, "not sent: the client cannot encode a missing offset")
    await new Promise((resolve) => process.nextTick(resolve))
    assert.deepStrictEqual(f.delivered, [[]])
  })
})
