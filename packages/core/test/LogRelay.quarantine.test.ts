// The log relay's quarantine over the in-memory log and broker: an invalid event is never
// published, it is set aside with its reason and its key's later events are held behind it, while
// every other key flows. Without a quarantine, an invalid event stops the relay rather than go out.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryLog from "@effect-outbox/testing/InMemoryLog"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { LogQuarantine, QuarantineEntry } from "../src/LogQuarantine.ts"
import type { LogMessage } from "../src/LogRecord.ts"
import * as LogRelay from "../src/LogRelay.ts"
import { LogSource } from "../src/LogSource.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const settings: LogRelay.Settings = {
  batchSize: 10,
  pollInterval: Duration.millis(2),
  leaseRetryInterval: Duration.millis(5),
  backoff: Duration.millis(2),
  maxBackoff: Duration.millis(10)
}

const event = (key: string, n: number, invalid?: string): LogMessage => {
  const id = randomUUID() as EventId
  return {
    id,
    topic: "orders",
    key,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(`${key}:${n}`),
    createdAt: Date.now(),
    ...(invalid === undefined ? {} : { invalid })
  }
}

/** A quarantine in memory: what was put, in order; nothing released. */
const memoryQuarantine = () => {
  const entries: Array<QuarantineEntry> = []
  const store: LogQuarantine = {
    blocked: Effect.sync(() =>
      entries.flatMap((e) => (e.message.key === null ? [] : [{ topic: e.message.topic, key: e.message.key }]))
    ),
    put: (more) =>
      Effect.sync(() => {
        for (const e of more) if (!entries.some((x) => x.message.id === e.message.id)) entries.push(e)
      }),
    released: Effect.succeed([]),
    settle: () => Effect.void
  }
  return { entries, store }
}

const run = (withQuarantine: boolean, missingTopicTx = false) =>
  Effect.gen(function* () {
    const log = yield* InMemoryLog.make
    const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
    const quarantine = memoryQuarantine()
    const source = LogSource.of({
      acquire: Effect.map(
        log.source.acquire,
        Option.map((lease) => (withQuarantine ? { ...lease, quarantine: quarantine.store } : lease))
      )
    })
    const layer = Layer.merge(Layer.succeed(LogSource)(source), InMemoryBroker.layerFrom(broker))
    // 30 events over keys a, b, c in transactions of 3; the 10th (key a) fails validation.
    const committed: Array<LogMessage> = []
    for (let i = 0; i < 30; i += 3) {
      const tx = [0, 1, 2].map((j) =>
        event(["a", "b", "c"][(i + j) % 3]!, i + j, i + j === 9 ? "bad metadata" : undefined)
      )
      yield* log.commit(tx)
      committed.push(...tx)
    }
    if (missingTopicTx) {
      // One transaction with two events of key x for a topic the broker does not have, between
      // events of other keys: both are refused in the same send.
      const tx = [
        event("b", 30),
        { ...event("x", 31), topic: "missing" },
        event("c", 32),
        { ...event("x", 33), topic: "missing" }
      ]
      yield* log.commit(tx)
      committed.push(...tx)
    }
    const relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
    const deadline = Date.now() + 2_000
    while (Date.now() < deadline) {
      const p = yield* log.positions
      if (p.confirmed === p.committed) break
      yield* Effect.sleep(Duration.millis(5))
    }
    yield* Fiber.interrupt(relay)
    const published = (yield* broker.control.records("orders")).map((r) => r.headers["event-id"]!)
    return { committed, published, entries: quarantine.entries, positions: yield* log.positions }
  })

describe("LogRelay quarantine", () => {
  it.live("an invalid event is quarantined, never published; its key waits behind it, the others flow", () =>
    Effect.gen(function* () {
      const { committed, entries, positions, published } = yield* run(true)
      const bad = committed[9]!
      const laterOfA = committed.slice(10).filter((m) => m.key === "a")
      assert.strictEqual(positions.confirmed, positions.committed)
      assert.notInclude(published, bad.id)
      assert.deepStrictEqual(
        entries.map((e) => [e.message.id, e.status]),
        [[bad.id, "QUARANTINED"], ...laterOfA.map((m) => [m.id, "HELD"])]
      )
      assert.strictEqual(entries[0]!.reason, "invalid: bad metadata")
      const others = committed.filter((m) => m.key !== "a" || committed.indexOf(m) < 9)
      assert.sameMembers(
        published,
        others.map((m) => m.id)
      )
    })
  )

  it.live("two events of one key refused in one send: the first is quarantined, the second held behind it", () =>
    Effect.gen(function* () {
      const { committed, entries, positions, published } = yield* run(true, true)
      const [first, second] = committed.filter((m) => m.topic === "missing")
      assert.strictEqual(positions.confirmed, positions.committed)
      const refused = entries.filter((e) => e.message.topic === "missing").map((e) => [e.message.id, e.status])
      assert.deepStrictEqual(refused, [
        [first!.id, "QUARANTINED"],
        [second!.id, "HELD"]
      ])
      assert.include(published, committed.at(-2)!.id)
    })
  )

  it.live("without a quarantine, an invalid event is not published and the relay goes no further", () =>
    Effect.gen(function* () {
      const { committed, positions, published } = yield* run(false)
      assert.isBelow(positions.confirmed, positions.committed)
      assert.notInclude(published, committed[9]!.id)
      assert.isTrue(committed.slice(12).every((m) => !published.includes(m.id)))
    })
  )
})
