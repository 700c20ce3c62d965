// A transaction larger than the relay's largest window is published in parts of at most
// `maxWindow` events, in log order, and confirmed once, at its end.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryLog from "@effect-outbox/testing/InMemoryLog"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type { LogMessage } from "../src/LogRecord.ts"
import * as LogRelay from "../src/LogRelay.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import { Publisher } from "../src/Publisher.ts"

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

describe("LogRelay and a very large transaction", () => {
  it.live("is published in parts of at most maxWindow events, in order, and confirmed once", () =>
    Effect.gen(function* () {
      const log = yield* InMemoryLog.make
      const broker = yield* InMemoryBroker.make({ topics: { orders: 3 } })
      const calls: Array<number> = []
      const inner = InMemoryBroker.layerFrom(broker)
      const counting = Layer.effect(Publisher)(
        Effect.map(Effect.service(Publisher), (publisher) =>
          Publisher.of({
            publish: (requests) =>
              Effect.suspend(() => {
                calls.push(requests.length)
                return publisher.publish(requests)
              })
          })
        )
      ).pipe(Layer.provide(inner))
      const layer = Layer.mergeAll(InMemoryLog.layerFrom(log), inner, counting)
      const tx = Array.from({ length: 250 }, (_, i) => event(i))
      yield* log.commit(tx)
      const relay = yield* Effect.forkDetach(
        LogRelay.run({ batchSize: 10, maxWindow: 40, pollInterval: Duration.millis(2) }).pipe(Effect.provide(layer))
      )
      const deadline = Date.now() + 10_000
      while ((yield* log.positions).confirmed < 1 && Date.now() < deadline) yield* Effect.sleep(Duration.millis(5))
      yield* Fiber.interrupt(relay)
      const records = yield* broker.control.records("orders")
      assert.strictEqual((yield* log.positions).confirmed, 1)
      assert.strictEqual(records.length, 250)
      assert.isAtMost(Math.max(...calls), 40)
      assert.strictEqual(
        calls.reduce((a, b) => a + b, 0),
        250
      )
      // Per key, the order of the transaction.
      for (let k = 0; k < 7; k++) {
        const want = tx.filter((m) => m.key === `k${k}`).map((m) => m.id)
        const got = records.filter((r) => r.key === `k${k}`).map((r) => r.headers["event-id"])
        assert.deepStrictEqual(got, want)
      }
    })
  )
})
