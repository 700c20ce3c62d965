// The gap of a re-created log (LogLease.backstop) over an in-memory log and its backstop table: a
// log created again starts at the current end, past events nobody published; the relay reads them
// back from the table (from before the last published one, as the margin for late commits makes
// it), skips what the broker has, and publishes the rest before anything the new log gives.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type { LogMessage } from "../src/LogRecord.ts"
import * as LogRelay from "../src/LogRelay.ts"
import { type LogGap, type LogLease, LogSource, LogSourceError, type LogWindow } from "../src/LogSource.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const settings: LogRelay.Settings = {
  batchSize: 10,
  maxWindow: 10,
  pollInterval: Duration.millis(2),
  leaseRetryInterval: Duration.millis(5),
  backoff: Duration.millis(1),
  maxBackoff: Duration.millis(2)
}

let sequence = 0
/** Ids that sort in enqueue order, as UUIDv7 ids do. */
const event = (key: string): LogMessage => {
  const id = `00000000-0000-7000-8000-${String(++sequence).padStart(12, "0")}` as EventId
  return {
    id,
    topic: "orders",
    key,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(id),
    createdAt: Date.now()
  }
}

/**
 * Transactions in commit order, each also in the backstop table. `recreate` drops the log and
 * makes a new one that starts at the current end (the transactions before are in the table only)
 * and marks the gap from `margin` events before the newest saved id, as PgLogProgress does.
 */
const recreatableLog = (margin: number) => {
  const transactions: Array<ReadonlyArray<LogMessage>> = []
  const table: Array<LogMessage> = []
  let confirmed = 0
  let generation = 0
  let newest: string | null = null
  let gap: LogGap | null = null
  const gone = new LogSourceError({ operation: "log.read", reason: "slot dropped", retriable: false })
  const lease = (mine: number): LogLease => {
    const alive = <A>(effect: Effect.Effect<A, LogSourceError>) =>
      Effect.suspend(() => (generation === mine ? effect : Effect.fail(gone)))
    return {
      read: (maxEntries) =>
        alive(
          Effect.sync((): LogWindow => {
            const entries: Array<LogMessage> = []
            let end = confirmed
            while (end < transactions.length && entries.length < maxEntries) {
              entries.push(...transactions[end]!.map((m) => ({ ...m, position: String(end + 1) })))
              end++
            }
            return { entries, upTo: end === confirmed ? null : String(end) }
          })
        ),
      confirm: (upTo) =>
        alive(
          Effect.sync(() => {
            confirmed = Number(upTo)
          })
        ),
      gauges: Effect.succeed({ lagBytes: 0, retainedBytes: 0 }),
      progress: {
        published: Effect.succeed(null),
        save: (_upTo, id) =>
          alive(
            Effect.sync(() => {
              if (id !== undefined && (newest === null || id > newest)) newest = id
            })
          ),
        compare: (a, b) => Number(a) - Number(b)
      },
      backstop: {
        gap: Effect.sync(() => gap),
        open: (g) =>
          Effect.succeed((after: string | undefined, limit: number) =>
            Effect.sync(() => {
              const from = g.after === null ? 0 : Math.max(0, table.findIndex((m) => m.id === g.after) - margin)
              const rest = table.slice(from).filter((m) => after === undefined || m.id > after)
              return { events: rest.slice(0, limit), more: rest.length > limit }
            })
          ),
        close: (g) =>
          Effect.sync(() => {
            if (gap === g) gap = null
          })
      }
    }
  }
  return {
    source: LogSource.of({ acquire: Effect.sync(() => Option.some(lease(generation))) }),
    /** Committed into the table always, into the log only while it exists. */
    commit: (messages: ReadonlyArray<LogMessage>, inLog = true) =>
      Effect.sync(() => {
        table.push(...messages)
        if (inLog) transactions.push(messages)
      }),
    recreate: Effect.sync(() => {
      generation++
      transactions.length = 0
      confirmed = 0
      gap = { start: "new", after: newest, from: 0, to: Date.now() }
    }),
    settled: Effect.sync(() => gap === null && confirmed === transactions.length)
  }
}

const waitUntil = (condition: Effect.Effect<boolean>, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 20_000
    while (!(yield* condition)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep(Duration.millis(2))
    }
  })

/** Every committed event on the topic once, each key in commit order. */
const assertDelivered = (broker: InMemoryBroker.Broker, committed: ReadonlyArray<LogMessage>) =>
  Effect.gen(function* () {
    const records = yield* broker.control.records("orders")
    const copies = new Map<string, number>()
    const firstByKey = new Map<string, Array<string>>()
    for (const r of records) {
      const id = r.headers["event-id"]!
      copies.set(id, (copies.get(id) ?? 0) + 1)
      if (copies.get(id) === 1) firstByKey.set(r.key!, [...(firstByKey.get(r.key!) ?? []), id])
    }
    const expected = new Map<string, Array<string>>()
    for (const m of committed) expected.set(m.key!, [...(expected.get(m.key!) ?? []), m.id])
    assert.strictEqual(committed.filter((m) => !copies.has(m.id)).length, 0, "lost")
    assert.strictEqual(
      [...copies.values()].reduce((s, n) => s + n - 1, 0),
      0,
      "duplicates"
    )
    assert.deepStrictEqual(
      [...expected].filter(([key, ids]) => (firstByKey.get(key) ?? []).join() !== ids.join()).map(([key]) => key),
      []
    )
  })

describe("LogRelay: the gap of a re-created log", () => {
  it.live("read back from the backstop before the new log: 0 lost, 0 duplicates, per-key order kept", () =>
    Effect.gen(function* () {
      const log = recreatableLog(8)
      const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
      const layer = Layer.merge(Layer.succeed(LogSource)(log.source), InMemoryBroker.layerFrom(broker))
      const committed: Array<LogMessage> = []
      const commit = (n: number, inLog = true) =>
        Effect.gen(function* () {
          for (let i = 0; i < n; i += 5) {
            const tx = Array.from({ length: 5 }, (_, j) => event(`k${(committed.length + j) % 7}`))
            yield* log.commit(tx, inLog)
            committed.push(...tx)
          }
        })
      yield* commit(30)
      let relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
      yield* waitUntil(log.settled, "the first 30")
      yield* Fiber.interrupt(relay)
      // The log lost while the relay is down: 20 events committed with no log, then a new one.
      yield* commit(20, false)
      yield* log.recreate
      yield* commit(10)
      const readBefore = (yield* Metric.value(LogRelay.gapEvents)).count
      relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
      yield* waitUntil(log.settled, "the gap and the new log")
      yield* commit(10)
      yield* waitUntil(log.settled, "10 more")
      yield* Fiber.interrupt(relay)

      yield* assertDelivered(broker, committed)
      // From 8 before the newest published through it (9, found on the broker and not re-sent) to
      // the table's end: the 20 of the gap and the 10 the new log gave too (skipped there).
      assert.strictEqual((yield* Metric.value(LogRelay.gapEvents)).count - readBefore, 9 + 20 + 10)
    })
  )

  it.live(
    "a relay stopped mid-gap leaves it open: the next lease reads it again, probed, and sends nothing twice",
    () =>
      Effect.gen(function* () {
        const log = recreatableLog(0)
        const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
        const layer = Layer.merge(Layer.succeed(LogSource)(log.source), InMemoryBroker.layerFrom(broker))
        const committed: Array<LogMessage> = []
        const commit = (n: number, inLog = true) =>
          Effect.gen(function* () {
            for (let i = 0; i < n; i += 5) {
              const tx = Array.from({ length: 5 }, (_, j) => event(`k${(committed.length + j) % 7}`))
              yield* log.commit(tx, inLog)
              committed.push(...tx)
            }
          })
        yield* commit(10)
        let relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
        yield* waitUntil(log.settled, "the first 10")
        yield* Fiber.interrupt(relay)
        yield* commit(40, false)
        yield* log.recreate
        // The gap's first partition batches land; after them every ack is lost (the records land).
        yield* broker.control.failPublish({ fault: "lost_ack", skip: 3, count: 1_000_000 })
        relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
        yield* waitUntil(
          Effect.map(broker.control.faultsFired, (n) => n >= 2),
          "acks lost in the gap"
        )
        yield* Fiber.interrupt(relay)
        assert.isFalse(yield* log.settled, "the gap is still open")
        yield* broker.control.clearFaults
        relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
        yield* waitUntil(log.settled, "the gap, read again")
        yield* commit(10)
        yield* waitUntil(log.settled, "10 more")
        yield* Fiber.interrupt(relay)
        yield* assertDelivered(broker, committed)
      })
  )
})
