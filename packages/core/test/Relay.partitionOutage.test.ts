// One partition the broker cannot reach (its leader down, NOT_ENOUGH_REPLICAS on it) must not
// throttle the others: its rows wait out their own backoff, attempts unchanged, while every other
// partition's rows keep flowing, in key order. When the bad partition's rows come due together and
// fill batches of their own, those batches say nothing new about the broker: they back off again
// and nothing else waits. Only a batch that gets nothing through while a destination not yet
// known to be out fails too (the whole broker) pauses the loop.
//
// The in-memory database and broker, with a publisher that answers BrokerUnavailableError for
// partition 3; the relay's time is the TestClock, and every wait is on a condition.
import { assert, describe, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import { BrokerUnavailableError } from "../src/Errors.ts"
import { keyPartition } from "../src/KeyPartition.ts"
import * as Outbox from "../src/Outbox.ts"
import type { OutboxMessage } from "../src/OutboxMessage.ts"
import { Publisher, type PublishOutcome, type PublishRequest } from "../src/Publisher.ts"
import * as Relay from "../src/Relay.ts"
import { draft, logTexts, makeWorld, rows } from "./support/outboxEnv.ts"

const PARTITIONS = 10
const BAD = 3
const KEYS = 300

/** `n` rows over 300 keys, key `k<i>` always on partition i % 10, numbered from `from`. */
const drafts = (n: number, from = 0, keyOf = (i: number) => i % KEYS) =>
  Array.from({ length: n }, (_, j) => {
    const k = keyOf(from + j)
    return draft(`k${k}`, from + j, { partition: k % PARTITIONS })
  })

const enqueue = (all: ReturnType<typeof drafts>) =>
  Effect.forEach(
    Array.from({ length: Math.ceil(all.length / 100) }, (_, i) => all.slice(i * 100, i * 100 + 100)),
    (chunk) => Outbox.enqueueAutocommit(chunk),
    { discard: true }
  )

/** The partition a request lands on: its own, or its key's (as the broker's partitioner places it). */
const partitionOf = (r: PublishRequest) => r.partition ?? keyPartition(r.key!, PARTITIONS)

/** The broker's publisher, except that partition 3 answers "unavailable"; counts the calls that held only its rows. */
const partitionDown = Effect.gen(function* () {
  const broker = yield* Publisher
  const calls = { badOnly: 0, all: 0 }
  const publisher = {
    publish: (requests: ReadonlyArray<PublishRequest>) =>
      Effect.gen(function* () {
        calls.all++
        if (requests.every((r) => partitionOf(r) === BAD)) calls.badOnly++
        const sent = yield* broker.publish(requests.filter((r) => partitionOf(r) !== BAD))
        let next = 0
        return requests.map(
          (r): PublishOutcome =>
            partitionOf(r) === BAD
              ? Result.fail(new BrokerUnavailableError({ topic: r.topic, reason: "NOT_ENOUGH_REPLICAS (test)" }))
              : sent[next++]!
        )
      })
  }
  return { publisher, calls }
})

/** Advances the relay's clock in 50 ms steps until `done` holds or `limit` has passed; returns the time it took. */
const until = (done: Effect.Effect<boolean>, limit: Duration.Input) =>
  Effect.gen(function* () {
    const limitMillis = Duration.toMillis(Duration.fromInputUnsafe(limit))
    let waited = 0
    for (;;) {
      // Let the relay's fibers run before judging (the clock does not move meanwhile).
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      if ((yield* done) || waited >= limitMillis) return waited
      yield* TestClock.adjust("50 millis")
      waited += 50
    }
  })

const healthy = (all: ReadonlyArray<OutboxMessage>) => all.filter((r) => r.partition !== BAD)
const onBad = (all: ReadonlyArray<OutboxMessage>) => all.filter((r) => r.partition === BAD)
const published = (all: ReadonlyArray<OutboxMessage>) => all.filter((r) => r.status === "PUBLISHED").length

describe("Relay with one partition unavailable", () => {
  it.effect(
    "the other partitions drain at once and in key order; the bad partition's rows wait, no attempt spent",
    () =>
      Effect.gen(function* () {
        const world = yield* makeWorld({ orders: PARTITIONS })
        yield* Effect.gen(function* () {
          yield* enqueue(drafts(3_000))
          const { publisher } = yield* partitionDown
          const scope = yield* Scope.make()
          yield* Relay.start({
            owner: "r1",
            pollInterval: Duration.millis(100),
            outageBackoff: Schedule.spaced("5 seconds")
          }).pipe(Scope.provide(scope), Effect.provideService(Publisher, publisher))
          // Before, each batch holding a row of partition 3 paused the whole loop (309 of 2,700 in 5 s).
          const took = yield* until(
            Effect.map(rows(world.database), (all) => published(healthy(all)) === 2_700),
            "2 seconds"
          )
          const all = yield* rows(world.database)
          assert.strictEqual(published(healthy(all)), 2_700, `healthy rows published after ${took} ms`)
          assert.isTrue(
            onBad(all).every((r) => r.status === "PENDING" && r.attempts === 0),
            "the bad partition's rows wait, no attempt counted"
          )
          // Key order on the healthy partitions: each key's records in the order they were enqueued.
          const byKey = new Map<string, Array<number>>()
          for (const text of yield* logTexts(world.broker)) {
            const [key, n] = text.split(":")
            byKey.set(key!, [...(byKey.get(key!) ?? []), Number(n)])
          }
          for (const [key, ns] of byKey)
            assert.deepStrictEqual(
              ns,
              [...ns].sort((a, b) => a - b),
              key
            )
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(world.layer))
      })
  )

  it.effect(
    "bad-partition rows coming due together fill batches of their own: they back off again, and new rows of the other partitions are not held up",
    () =>
      Effect.gen(function* () {
        const world = yield* makeWorld({ orders: PARTITIONS })
        yield* Effect.gen(function* () {
          // 400 rows, every 4th on a healthy partition, the rest on 30 keys of partition 3: the
          // first batch is mixed, so partition 3 is known to be out while the broker answers.
          const healthyKey = (i: number) => 2_000 + [0, 1, 2, 4, 5, 6, 7, 8, 9][i % 9]!
          yield* enqueue(drafts(400, 0, (i) => (i % 4 === 0 ? healthyKey(i) : (i % 30) * PARTITIONS + BAD)))
          const { calls, publisher } = yield* partitionDown
          const scope = yield* Scope.make()
          yield* Relay.start({
            owner: "r1",
            batchSize: 100,
            pollInterval: Duration.millis(100),
            outageBackoff: Schedule.spaced("5 seconds")
          }).pipe(Scope.provide(scope), Effect.provideService(Publisher, publisher))
          yield* until(
            Effect.map(rows(world.database), (all) => published(healthy(all)) === 100),
            "1 second"
          )
          assert.strictEqual(published(healthy(yield* rows(world.database))), 100)
          assert.strictEqual(calls.badOnly, 0, "so far every batch was mixed")
          // Partition 3's heads come due together 5 s later: batches made only of them.
          yield* until(
            Effect.sync(() => calls.badOnly >= 1),
            "6 seconds"
          )
          assert.isAtLeast(calls.badOnly, 1, "the bad rows came due and were claimed again, alone")
          // That is no news about the broker: new rows of healthy partitions go out without waiting.
          yield* enqueue(drafts(50, 1_000, healthyKey))
          const took = yield* until(
            Effect.map(rows(world.database), (all) => published(healthy(all)) === 150),
            "2 seconds"
          )
          const all = yield* rows(world.database)
          assert.strictEqual(published(healthy(all)), 150, `new healthy rows published after ${took} ms`)
          assert.isAtMost(took, 500, "no loop-wide pause (that would be 5 s)")
          assert.isTrue(onBad(all).every((r) => r.status === "PENDING" && r.attempts === 0))
          const now = yield* Clock.currentTimeMillis
          const heads = onBad(all).filter((r) => r.lastError?.includes("no attempt counted") === true)
          assert.isAbove(heads.length, 0)
          assert.isTrue(
            heads.every((r) => r.availableAt > now),
            "the bad partition's heads wait for their next backoff"
          )
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(world.layer))
      })
  )

  it.effect(
    "rows routed by key (no partition named) share their topic's backoff, and the healthy partitions still drain",
    () =>
      Effect.gen(function* () {
        const world = yield* makeWorld({ orders: PARTITIONS })
        yield* Effect.gen(function* () {
          yield* enqueue(Array.from({ length: 3_000 }, (_, i) => draft(`k${i % KEYS}`, i)))
          const { publisher } = yield* partitionDown
          const scope = yield* Scope.make()
          yield* Relay.start({
            owner: "r1",
            pollInterval: Duration.millis(100),
            outageBackoff: Schedule.spaced("5 seconds")
          }).pipe(Scope.provide(scope), Effect.provideService(Publisher, publisher))
          const onBadKey = (r: OutboxMessage) => keyPartition(r.key!, PARTITIONS) === BAD
          const total = (yield* rows(world.database)).filter((r) => !onBadKey(r)).length
          const took = yield* until(
            Effect.map(rows(world.database), (all) => published(all.filter((r) => !onBadKey(r))) === total),
            "2 seconds"
          )
          const all = yield* rows(world.database)
          assert.strictEqual(published(all.filter((r) => !onBadKey(r))), total, `published after ${took} ms`)
          assert.isTrue(all.filter(onBadKey).every((r) => r.status === "PENDING" && r.attempts === 0))
          yield* Scope.close(scope, Exit.void)
        }).pipe(Effect.provide(world.layer))
      })
  )

  it.effect("the whole broker unavailable still pauses the whole loop", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ orders: PARTITIONS })
      yield* Effect.gen(function* () {
        yield* enqueue(drafts(300))
        let calls = 0
        const down = {
          publish: (requests: ReadonlyArray<PublishRequest>) => {
            calls++
            return Effect.succeed(
              requests.map(
                (r): PublishOutcome =>
                  Result.fail(new BrokerUnavailableError({ topic: r.topic, reason: "connection refused (test)" }))
              )
            )
          }
        }
        const scope = yield* Scope.make()
        yield* Relay.start({
          owner: "r1",
          pollInterval: Duration.millis(100),
          outageBackoff: Schedule.spaced("5 seconds")
        }).pipe(Scope.provide(scope), Effect.provideService(Publisher, down))
        yield* until(
          Effect.sync(() => calls >= 1),
          "1 second"
        )
        // 4.5 s later the loop still waits, although 200 rows of other keys were claimable.
        yield* until(Effect.succeed(false), "4.5 seconds")
        assert.strictEqual(calls, 1, "one publish call, then the loop-wide pause")
        const all = yield* rows(world.database)
        assert.isTrue(all.every((r) => r.attempts === 0))
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provide(world.layer))
    })
  )
})
