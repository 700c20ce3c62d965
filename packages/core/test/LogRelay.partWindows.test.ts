// A source that gives one transaction in parts (`LogWindow.part`, a transaction larger than its
// buffer): the relay publishes each part, saves it (`LogProgress.savePart`) and only then
// releases it; a part saved by an earlier lease is released before the first read, so its events
// are never sent again; the transaction's commit window is saved and confirmed as usual.
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
import { type LogLease, type LogPart, LogSource, type LogWindow } from "../src/LogSource.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const event = (n: number): LogMessage => {
  const id = randomUUID() as EventId
  const payload = new TextEncoder().encode(String(n))
  return {
    id,
    topic: "orders",
    key: `k${n % 3}`,
    partition: null,
    headers: { "event-id": id },
    payload,
    createdAt: Date.now()
  }
}

const lsn = (text: string) => Number.parseInt(text.split("/")[1]!, 16)

describe("LogRelay and a transaction given in parts", () => {
  it.live("publishes, saves, then releases each part; a part saved before is released first and never re-sent", () =>
    Effect.gen(function* () {
      const tx = Array.from({ length: 10 }, (_, i) => event(i))
      const calls: Array<string> = []
      // The earlier lease saved the first 3 events of the transaction committing at 0/100.
      const saved: LogPart = { transaction: "0/100", done: 3 }
      // What the source gives once that part is released: events 3-5 as a part, then the commit.
      const script: Array<LogWindow> = [
        { entries: tx.slice(3, 6), upTo: null, part: { transaction: "0/100", done: 6 } },
        { entries: tx.slice(6).map((m) => ({ ...m, position: "0/180" })), upTo: "0/180" }
      ]
      let next = 0
      const read = Effect.sync((): LogWindow => {
        calls.push("read")
        const window = script[next]
        return window === undefined ? { entries: [], upTo: null } : window
      })
      const lease: LogLease = {
        read: () => read,
        confirm: (upTo) => Effect.sync(() => void calls.push(`confirm ${upTo}`)),
        release: (part) =>
          Effect.sync(() => {
            calls.push(`release ${part.transaction} ${part.done}`)
            if (part.done > saved.done) next++
          }),
        awaitMore: () => Effect.sleep(Duration.millis(5)),
        gauges: Effect.succeed({ lagBytes: 0, retainedBytes: 0 }),
        progress: {
          published: Effect.succeed("0/40"),
          publishedPart: Effect.succeed(saved),
          save: (upTo) =>
            Effect.sync(() => {
              calls.push(`save ${upTo}`)
              next++
            }),
          savePart: (part) => Effect.sync(() => void calls.push(`savePart ${part.transaction} ${part.done}`)),
          compare: (a, b) => lsn(a) - lsn(b)
        }
      }
      const source = Layer.succeed(LogSource)(LogSource.of({ acquire: Effect.succeed(Option.some(lease)) }))
      const broker = yield* InMemoryBroker.make({ topics: { orders: 1 } })
      const relay = yield* Effect.forkDetach(
        LogRelay.run({ pollInterval: Duration.millis(2) }).pipe(
          Effect.provide(Layer.mergeAll(source, InMemoryBroker.layerFrom(broker)))
        )
      )
      const deadline = Date.now() + 10_000
      while (!calls.includes("confirm 0/180") && Date.now() < deadline) yield* Effect.sleep(Duration.millis(5))
      yield* Fiber.interrupt(relay)
      const records = yield* broker.control.records("orders")
      // Events 0-2 were on the broker before this lease: only 3-9 are sent, once each, in order.
      assert.deepStrictEqual(
        records.map((r) => r.headers["event-id"]),
        tx.slice(3).map((m) => m.id)
      )
      const steps = calls.filter((c) => c !== "read")
      assert.deepStrictEqual(steps.slice(0, 5), [
        "release 0/100 3", // the saved part, before anything is read
        "savePart 0/100 6", // the part published, then saved...
        "release 0/100 6", // ...and only then released
        "save 0/180", // the commit's window: saved, then confirmed
        "confirm 0/180"
      ])
      assert.strictEqual(calls.indexOf("release 0/100 3"), 0, "released before the first read")
    })
  )
})
