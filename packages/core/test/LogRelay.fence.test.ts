// The lease's fence (LogLease.fence) before each window: while a backlog lasts, the next window's
// fence is proven beside the previous window's progress save, after that window's ack and before
// the next publish; a fence that fails stops the relay before its window is published, and the
// window acknowledged before it is still saved and confirmed.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { LogMessage } from "../src/LogRecord.ts"
import * as LogRelay from "../src/LogRelay.ts"
import { type LogLease, LogSource, LogSourceError, type LogWindow } from "../src/LogSource.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import { Publisher } from "../src/Publisher.ts"

const settings: LogRelay.Settings = {
  batchSize: 5,
  maxWindow: 5,
  pollInterval: Duration.millis(2),
  leaseRetryInterval: Duration.millis(5),
  backoff: Duration.millis(1),
  maxBackoff: Duration.millis(2)
}

const event = (n: number): LogMessage => {
  const id = randomUUID() as EventId
  return {
    id,
    topic: "orders",
    key: `k${n % 7}`,
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(String(n)),
    createdAt: Date.now()
  }
}

type Step =
  | { readonly kind: "fence"; readonly start: number; readonly end: number }
  | { readonly kind: "publish"; readonly start: number; readonly end: number }
  | { readonly kind: "save"; readonly start: number; readonly end: number }

/**
 * `transactions` of 5 events, one per window, `more` set while transactions remain. Every fence,
 * publish and progress save is stamped on one counter; saves take 20 ms. One lease only.
 */
const fencedLog = (transactions: number, refuseAfterPublishes: number) => {
  const log = Array.from({ length: transactions }, (_, t) => Array.from({ length: 5 }, (_, i) => event(t * 5 + i)))
  const steps: Array<Step> = []
  let clock = 0
  let confirmed = 0
  let published = 0
  let leases = 0
  const stamp = <A, E>(kind: Step["kind"], effect: Effect.Effect<A, E>) =>
    Effect.suspend(() => {
      const start = clock++
      return Effect.tap(effect, () => Effect.sync(() => void steps.push({ kind, start, end: clock++ })))
    })
  const lease: LogLease = {
    read: () =>
      Effect.sync((): LogWindow => {
        if (confirmed >= transactions) return { entries: [], upTo: null }
        const at = confirmed + 1
        return {
          entries: log[confirmed]!.map((m) => ({ ...m, position: String(at) })),
          upTo: String(at),
          more: at < transactions
        }
      }),
    confirm: (upTo) =>
      Effect.sync(() => {
        confirmed = Number(upTo)
      }),
    gauges: Effect.succeed({ lagBytes: 0, retainedBytes: 0 }),
    progress: {
      published: Effect.succeed(null),
      save: () => stamp("save", Effect.sleep(Duration.millis(20))),
      compare: (a, b) => Number(a) - Number(b)
    },
    fence: stamp(
      "fence",
      Effect.suspend(() =>
        published >= refuseAfterPublishes
          ? Effect.fail(new LogSourceError({ operation: "log.fence", reason: "moved on", retriable: true }))
          : Effect.void
      )
    )
  }
  const source = LogSource.of({
    acquire: Effect.sync(() => (leases++ === 0 ? Option.some(lease) : Option.none()))
  })
  const publisher = Layer.effect(Publisher)(
    Effect.map(Effect.service(Publisher), (inner) =>
      Publisher.of({
        publish: (requests) =>
          stamp(
            "publish",
            Effect.tap(inner.publish(requests), () =>
              Effect.sync(() => {
                published++
              })
            )
          )
      })
    )
  )
  return {
    steps,
    source,
    publisher,
    confirmed: () => confirmed,
    published: () => published
  }
}

const runFor = (log: ReturnType<typeof fencedLog>, until: () => boolean) =>
  Effect.gen(function* () {
    const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
    const inner = InMemoryBroker.layerFrom(broker)
    const layer = Layer.mergeAll(Layer.succeed(LogSource)(log.source), inner, log.publisher.pipe(Layer.provide(inner)))
    const relay = yield* Effect.forkDetach(LogRelay.run(settings).pipe(Effect.provide(layer)))
    const deadline = Date.now() + 10_000
    while (!until() && Date.now() < deadline) yield* Effect.sleep(Duration.millis(2))
    // Room for anything the relay would still do wrongly.
    yield* Effect.sleep(Duration.millis(50))
    yield* Fiber.interrupt(relay)
    return (yield* broker.control.records("orders")).length
  })

describe("LogRelay and the lease's fence", () => {
  it.live("while a backlog lasts, each window's fence is proven after the previous ack, beside its save", () =>
    Effect.gen(function* () {
      const log = fencedLog(8, Number.POSITIVE_INFINITY)
      const records = yield* runFor(log, () => log.confirmed() === 8)
      assert.strictEqual(records, 40)
      const of = (kind: Step["kind"]) => log.steps.filter((s) => s.kind === kind)
      const [fences, publishes, saves] = [of("fence"), of("publish"), of("save")]
      assert.strictEqual(publishes.length, 8)
      assert.strictEqual(fences.length, 8) // one per window, none wasted
      for (let i = 1; i < publishes.length; i++) {
        // A fence that began after window i-1 was acknowledged and ended before window i was sent.
        const proof = fences.find((f) => f.start > publishes[i - 1]!.end && f.end < publishes[i]!.start)
        assert.isDefined(proof, `window ${i + 1} has a fence between the previous ack and its publish`)
        // Taken beside the previous window's save, not after it.
        assert.isBelow(proof!.start, saves[i - 1]!.end)
      }
    })
  )

  it.live("a failed fence stops the relay before its window; the window acknowledged before is confirmed", () =>
    Effect.gen(function* () {
      const log = fencedLog(8, 3)
      const records = yield* runFor(log, () => log.confirmed() >= 3)
      assert.strictEqual(log.published(), 3)
      assert.strictEqual(records, 15)
      assert.strictEqual(log.confirmed(), 3)
    })
  )
})
