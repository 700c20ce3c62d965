// One partition the broker cannot reach (a broker of several down, NOT_ENOUGH_REPLICAS on one
// partition) must not throttle the others: its rows wait out the outage backoff, attempts
// unchanged, while every other partition's rows keep flowing. Only a batch in which nothing got
// through pauses the whole loop.
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import { BrokerUnavailableError } from "../src/Errors.ts"
import * as Outbox from "../src/Outbox.ts"
import { Publisher, type PublishOutcome, type PublishRequest } from "../src/Publisher.ts"
import * as Relay from "../src/Relay.ts"
import { draft, makeWorld, rows } from "./support/outboxEnv.ts"

const PARTITIONS = 10
const BAD = 3

describe("Relay with one partition unavailable", () => {
  it.effect(
    "the other partitions' rows are all published within seconds; the bad partition's wait, no attempt spent",
    () =>
      Effect.gen(function* () {
        const world = yield* makeWorld({ orders: PARTITIONS })
        yield* Effect.gen(function* () {
          // 3,000 rows over 300 keys, each key on partition key % 10.
          const drafts = Array.from({ length: 3_000 }, (_, i) =>
            draft(`k${i % 300}`, i, { partition: (i % 300) % PARTITIONS })
          )
          for (let i = 0; i < drafts.length; i += 100) yield* Outbox.enqueueAutocommit(drafts.slice(i, i + 100))
          const broker = yield* Publisher
          const partial = {
            publish: (requests: ReadonlyArray<PublishRequest>) =>
              Effect.gen(function* () {
                const good = requests.filter((r) => r.partition !== BAD)
                const sent = yield* broker.publish(good)
                let next = 0
                return requests.map(
                  (r): PublishOutcome =>
                    r.partition === BAD
                      ? Result.fail(
                          new BrokerUnavailableError({ topic: r.topic, reason: "NOT_ENOUGH_REPLICAS (test)" })
                        )
                      : sent[next++]!
                )
              })
          }
          const scope = yield* Scope.make()
          yield* Relay.start({ owner: "r1", pollInterval: Duration.millis(100) }).pipe(
            Scope.provide(scope),
            Effect.provideService(Publisher, partial)
          )
          // Five seconds of the relay's time.
          for (let i = 0; i < 50; i++) yield* TestClock.adjust("100 millis")
          yield* Scope.close(scope, Exit.void)
          const all = yield* rows(world.database)
          const healthy = all.filter((r) => r.partition !== BAD)
          const bad = all.filter((r) => r.partition === BAD)
          assert.strictEqual(healthy.filter((r) => r.status === "PUBLISHED").length, healthy.length)
          assert.isTrue(bad.every((r) => r.status === "PENDING" && r.attempts === 0))
        }).pipe(Effect.provide(world.layer))
      })
  )
})
