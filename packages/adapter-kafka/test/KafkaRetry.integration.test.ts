// Broker calls against a port nobody listens on: each retries connection errors on the shared
// policy (KafkaRetry) and, once its bound is spent, fails with the caller's typed error that
// names the cause; it neither fails at the first refusal nor hangs.

import { createServer } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as References from "effect/References"
import type * as Scope from "effect/Scope"
import * as KafkaOutbox from "../src/KafkaOutbox.ts"
import * as KafkaRetry from "../src/KafkaRetry.ts"

/** A port that was free a moment ago: bound, then released. */
const closedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

const policy: KafkaRetry.BrokerRetryPolicy = { initialDelayMillis: 50, maxDelayMillis: 400, totalMillis: 2_000 }

/** Runs `use` on the Kafka layers pointed at a closed port; returns its error, the time and the retries logged. */
const againstClosedPort = <E>(
  use: Effect.Effect<unknown, E, BrokerAdmin | BrokerProbe | ConsumerSource | Scope.Scope>
) =>
  Effect.gen(function* () {
    const port = yield* Effect.promise(closedPort)
    const retries: Array<string> = []
    const capture = Logger.make<unknown, void>(({ message }) => {
      const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
      if (/attempt \d+ failed, retrying/.test(text)) retries.push(text)
    })
    const layer = KafkaOutbox.layer({
      brokers: [`127.0.0.1:${port}`],
      clientId: "adapter-kafka-closed-port",
      connectionTimeout: 500,
      // kafkajs's own retries off: the policy under test does the retrying.
      kafkaConfig: { retry: { retries: 0 } }
    })
    const started = Date.now()
    const error = yield* Effect.scoped(use).pipe(
      Effect.flip,
      Effect.provide(layer),
      Effect.provideService(KafkaRetry.CurrentPolicy, policy),
      Effect.provide(Logger.layer([capture])),
      Effect.provideService(References.MinimumLogLevel, "Debug")
    )
    return { error, elapsed: Date.now() - started, retries }
  })

const withinBound = (result: { readonly elapsed: number; readonly retries: ReadonlyArray<string> }) => {
  // It kept trying for the whole bound (not a failure at the first refusal)...
  assert.isAtLeast(result.elapsed, policy.totalMillis)
  assert.isAtLeast(result.retries.length, 3, result.retries.join("\n"))
  // ...and then gave up: the bound plus one attempt, with room for a loaded machine.
  assert.isBelow(result.elapsed, policy.totalMillis + 10_000)
}

describe("broker calls against a closed port", () => {
  it.live("metadata (partitionCount): a BrokerAdminError naming the connection error", () =>
    Effect.gen(function* () {
      const result = yield* againstClosedPort(
        Effect.gen(function* () {
          return yield* (yield* BrokerAdmin).partitionCount("t")
        })
      )
      assert.strictEqual(result.error._tag, "BrokerAdminError")
      assert.strictEqual(result.error.operation, "partitionCount")
      assert.match(result.error.reason, /KafkaJSConnectionError.*ECONNREFUSED/)
      withinBound(result)
    })
  )

  it.live("the probe: a ProbeError, not an answer", () =>
    Effect.gen(function* () {
      const eventId = yield* makeEventId
      const result = yield* againstClosedPort(
        Effect.gen(function* () {
          return yield* (yield* BrokerProbe).find({ topic: "t", partition: 0, eventId, since: Date.now() })
        })
      )
      assert.strictEqual(result.error._tag, "ProbeError")
      assert.match(result.error.reason, /KafkaJSConnectionError.*ECONNREFUSED/)
      withinBound(result)
    })
  )

  it.live("a consumer group subscription: a ConsumerSourceError", () =>
    Effect.gen(function* () {
      const result = yield* againstClosedPort(
        Effect.gen(function* () {
          return yield* (yield* ConsumerSource).subscribe({ groupId: "g", topics: ["t"] })
        })
      )
      assert.strictEqual(result.error._tag, "ConsumerSourceError")
      assert.match(result.error.reason, /ECONNREFUSED|KafkaJSConnectionError/)
      withinBound(result)
    })
  )
})
