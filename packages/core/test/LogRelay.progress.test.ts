// The log relay's durable progress (LogLease.progress) over an in-memory log that can be rewound,
// as a PostgreSQL restart rewinds a slot to its last save: what the relay recorded as published is
// confirmed again without a send; the windows past it are published once, in order.

import { randomUUID } from "node:crypto"
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
import { type LogLease, LogSource, LogSourceError, type LogWindow } from "../src/LogSource.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const settings: LogRelay.Settings = {
  batchSize: 10,
  maxWindow: 10,
  pollInterval: Duration.millis(2),
  leaseRetryInterval: Duration.millis(5),
  backoff: Duration.millis(1),
  maxBackoff: Duration.millis(2)
}

/**
 * Transactions in commit order; positions are transaction counts. `rewind` moves the confirmed
 * position back and ends the current lease, like a server restart; `withProgress` gives leases a
 * progress record that survives it.
 */
const rewindableLog = (withProgress: boolean) => {
  const transactions: Array<ReadonlyArray<LogMessage>> = []
  let confirmed = 0
  let generation = 0
  let saved: string | null = null
  const gone = new LogSourceError({ operation: "log.read", reason: "server restarted", retriable: true })
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
      progress: withProgress
        ? {
            published: Effect.sync(() => saved),
            save: (upTo) =>
              alive(
                Effect.sync(() => {
                  saved = saved === null || Number(upTo) > Number(saved) ? upTo : saved
                })
              ),
            compare: (a, b) => Number(a) - Number(b)
          }
        : undefined
    }
  }
  return {
    source: LogSource.of({ acquire: Effect.sync(() => Option.some(lease(generation))) }),
    commit: (messages: ReadonlyArray<LogMessage>) => Effect.sync(() => void transactions.push(messages)),
    rewind: (to: number) =>
      Effect.sync(() => {
        confirmed = to
        generation++
      }),
    confirmedAll: Effect.sync(() => confirmed === transactions.length)
  }
}

const event = (key: string, n: number): LogMessage => {
  const id = randomUUID() as EventId
  return {
    id,
    topic: "orders",
    key,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(`${key}:${n}`),
    createdAt: Date.now()
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

/** 100 events in transactions of 5, published; the log rewound to transaction 2; 20 more. */
const rewindRun = (options: { readonly withProgress: boolean; readonly probeWorks: boolean }) =>
  Effect.gen(function* () {
    const log = rewindableLog(options.withProgress)
    const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
    const layer = Layer.merge(Layer.succeed(LogSource)(log.source), InMemoryBroker.layerFrom(broker))
    const committed: Array<LogMessage> = []
    const commit = (from: number, n: number) =>
      Effect.gen(function* () {
        for (let i = from; i < from + n; i += 5) {
          const tx = Array.from({ length: 5 }, (_, j) => event(`k${(i + j) % 7}`, i + j))
          yield* log.commit(tx)
          committed.push(...tx)
        }
      })
    yield* commit(0, 100)
    const relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
    yield* waitUntil(log.confirmedAll, "the first 100")
    if (!options.probeWorks) yield* broker.control.failNext({ operation: "probe", count: 1_000_000 })
    const skippedBefore = (yield* Metric.value(LogRelay.rewindSkipped)).count
    yield* log.rewind(2)
    yield* commit(100, 20)
    yield* waitUntil(log.confirmedAll, "the log to be confirmed again")
    yield* Fiber.interrupt(relay)
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
    return {
      lost: committed.filter((m) => !copies.has(m.id)).length,
      duplicates: [...copies.values()].reduce((s, n) => s + n - 1, 0),
      orderViolations: [...expected].filter(([key, ids]) => (firstByKey.get(key) ?? []).join() !== ids.join()).length,
      skipped: (yield* Metric.value(LogRelay.rewindSkipped)).count - skippedBefore
    }
  })

describe("LogRelay durable progress", () => {
  it.live("a rewound log is confirmed again without a send, even when the broker cannot be probed", () =>
    Effect.gen(function* () {
      const result = yield* rewindRun({ withProgress: true, probeWorks: false })
      // Transactions 3..20 (90 events) were given again and skipped by the progress.
      assert.deepStrictEqual(result, { lost: 0, duplicates: 0, orderViolations: 0, skipped: 90 })
    })
  )

  it.live("without progress and without a probe answer, the rewound range is sent again", () =>
    Effect.gen(function* () {
      const result = yield* rewindRun({ withProgress: false, probeWorks: false })
      assert.strictEqual(result.lost, 0)
      assert.strictEqual(result.skipped, 0)
      assert.isAbove(result.duplicates, 80)
    })
  )

  it.live("without progress, the probe goes on while whole windows are found on the broker: no duplicate", () =>
    Effect.gen(function* () {
      const result = yield* rewindRun({ withProgress: false, probeWorks: true })
      assert.deepStrictEqual(result, { lost: 0, duplicates: 0, orderViolations: 0, skipped: 0 })
    })
  )
})
