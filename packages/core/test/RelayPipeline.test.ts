// The pipelined relay loop (`pipelineDepth`): several batches of one relay in flight at once,
// per-key order across them, the bound, the self wake-up after a batch that held keys, and
// shutdown / crash with more than one batch outstanding.
import { assert, describe, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import { RetriablePublishError } from "../src/Errors.ts"
import * as Outbox from "../src/Outbox.ts"
import type { OutboxMessage } from "../src/OutboxMessage.ts"
import { Publisher, type PublishRequest } from "../src/Publisher.ts"
import * as Relay from "../src/Relay.ts"
import * as StaleRecovery from "../src/StaleRecovery.ts"
import { draft, logTexts, makeWorld, row, rows } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(
  body: (world: World) => Effect.Effect<A, E, Layer.Success<World["layer"]>>,
  topics?: Record<string, number>
) =>
  Effect.gen(function* () {
    const world = yield* makeWorld(topics)
    return yield* body(world).pipe(Effect.provide(world.layer))
  })

const count = (all: ReadonlyArray<OutboxMessage>, status: OutboxMessage["status"]) =>
  all.filter((r) => r.status === status).length

/**
 * A publisher whose calls wait at a gate until `open`; it records each call's payload texts
 * when the call starts and when it returns.
 */
const gatedPublisher = Effect.gen(function* () {
  const inner = yield* Publisher
  const gate = yield* Deferred.make<void>()
  const started: Array<ReadonlyArray<string>> = []
  const finished: Array<ReadonlyArray<string>> = []
  const texts = (requests: ReadonlyArray<PublishRequest>) => requests.map((r) => new TextDecoder().decode(r.payload))
  const publisher = {
    publish: (requests: ReadonlyArray<PublishRequest>) =>
      Effect.gen(function* () {
        started.push(texts(requests))
        yield* Deferred.await(gate)
        const outcomes = yield* inner.publish(requests)
        finished.push(texts(requests))
        return outcomes
      })
  }
  return { publisher, open: Deferred.succeed(gate, undefined), started, finished }
})

// Lets forked fibers run without moving the clock past anything that matters.
const settle = Effect.gen(function* () {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

describe("Relay pipelining", () => {
  it.effect("claims the next batch while the previous one is still being published", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([
          draft("a", 1),
          draft("b", 1),
          draft("c", 1),
          draft("d", 1),
          draft("e", 1),
          draft("f", 1)
        ])
        const gated = yield* gatedPublisher
        const scope = yield* Scope.make()
        const relay = yield* Relay.start({ owner: "r1", batchSize: 2, pipelineDepth: 2 }).pipe(
          Scope.provide(scope),
          Effect.provideService(Publisher, gated.publisher)
        )
        yield* settle
        // Batch 1 waits in its publish; batch 2 was claimed meanwhile and is publishing too. The
        // bound holds: no third claim while two batches are in flight.
        assert.strictEqual(gated.started.length, 2, "two publish calls started")
        assert.strictEqual(gated.finished.length, 0, "while none has finished")
        const held = yield* rows(world.database)
        assert.strictEqual(count(held, "DISPATCHING"), 4)
        assert.strictEqual(count(held, "PENDING"), 2)
        assert.strictEqual((yield* relay.inFlight).length, 4)
        const claims = (yield* world.database.control.history).filter((c) => c.operation === "claim")
        assert.strictEqual(claims.length, 4, "the store saw the second claim before the first publish returned")

        yield* gated.open
        yield* settle
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 6)
        assert.strictEqual((yield* relay.inFlight).length, 0)
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("pipelineDepth 1 keeps one batch at a time (claim → publish → mark)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 1), draft("c", 1), draft("d", 1)])
        const gated = yield* gatedPublisher
        const scope = yield* Scope.make()
        yield* Relay.start({ owner: "r1", batchSize: 2, pipelineDepth: 1 }).pipe(
          Scope.provide(scope),
          Effect.provideService(Publisher, gated.publisher)
        )
        yield* settle
        assert.strictEqual(gated.started.length, 1)
        assert.strictEqual(count(yield* rows(world.database), "DISPATCHING"), 2)
        yield* gated.open
        yield* settle
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 4)
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("batches in flight together never share a key, and each key is published in order (R1.4)", () =>
    inWorld(
      (world) =>
        Effect.gen(function* () {
          yield* Outbox.enqueueAutocommit([
            draft("a", 1),
            draft("b", 1),
            draft("a", 2),
            draft(null, 1),
            draft("a", 3),
            draft("b", 2),
            draft(null, 2),
            draft("a", 4)
          ])
          const gated = yield* gatedPublisher
          const scope = yield* Scope.make()
          // An hour's poll interval and no further enqueues: only the relay's own wake-up after a
          // batch that held keys can bring a:2 and later in before the test ends.
          yield* Relay.start({
            owner: "r1",
            batchSize: 2,
            pipelineDepth: 3,
            pollInterval: Duration.hours(1)
          }).pipe(Scope.provide(scope), Effect.provideService(Publisher, gated.publisher))
          yield* settle
          // Batch 1 holds a:1 and b:1; batch 2 could take only the unkeyed rows; a third claim
          // found nothing claimable (a and b are in flight).
          assert.deepStrictEqual(gated.started, [
            ["a:1", "b:1"],
            ["-:1", "-:2"]
          ])
          const dispatching = (yield* rows(world.database)).filter((r) => r.status === "DISPATCHING")
          assert.deepStrictEqual(dispatching.map((r) => r.key ?? "-").sort(), ["-", "-", "a", "b"])
          yield* gated.open
          yield* settle
          assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 8)
          const texts = yield* logTexts(world.broker)
          assert.deepStrictEqual(
            texts.filter((t) => t.startsWith("a:")),
            ["a:1", "a:2", "a:3", "a:4"]
          )
          assert.deepStrictEqual(
            texts.filter((t) => t.startsWith("b:")),
            ["b:1", "b:2"]
          )
          yield* Scope.close(scope, Exit.void)
        }),
      { orders: 1 }
    )
  )

  it.effect("a full batch is followed by the next claim at once, not by the poll interval", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(Array.from({ length: 10 }, (_, i) => draft(`k${i}`, 1)))
        const scope = yield* Scope.make()
        yield* Relay.start({ owner: "r1", batchSize: 3, pollInterval: Duration.hours(1) }).pipe(Scope.provide(scope))
        yield* settle
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 10)
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("a key cut at maxPerKey is claimed again once its batch is marked, not at the next poll", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2), draft("a", 3), draft("b", 1)])
        for (const pipelineDepth of [1, 2]) {
          const scope = yield* Scope.make()
          yield* Relay.start({
            owner: `r${pipelineDepth}`,
            batchSize: 10,
            maxPerKey: 1,
            pipelineDepth,
            pollInterval: Duration.hours(1)
          }).pipe(Scope.provide(scope))
          yield* settle
          yield* Scope.close(scope, Exit.void)
          assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), pipelineDepth === 1 ? 4 : 8)
          if (pipelineDepth === 1) {
            yield* Outbox.enqueueAutocommit([draft("a", 4), draft("a", 5), draft("a", 6), draft("b", 2)])
          }
        }
        assert.deepStrictEqual(
          (yield* logTexts(world.broker)).filter((t) => t.startsWith("a:")),
          ["a:1", "a:2", "a:3", "a:4", "a:5", "a:6"]
        )
      })
    )
  )

  it.effect("graceful shutdown waits for every batch in flight", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 1), draft("c", 1), draft("d", 1)])
        const inner = yield* Publisher
        const slow = {
          publish: (requests: ReadonlyArray<PublishRequest>) =>
            Effect.andThen(Effect.sleep("1 second"), inner.publish(requests))
        }
        const scope = yield* Scope.make()
        const relay = yield* Relay.start({
          owner: "r1",
          batchSize: 2,
          pipelineDepth: 2,
          shutdownTimeout: Duration.seconds(5)
        }).pipe(Scope.provide(scope), Effect.provideService(Publisher, slow))
        yield* settle
        assert.strictEqual((yield* relay.inFlight).length, 4, "two batches in flight")
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(closing)
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 4)
        assert.strictEqual((yield* relay.inFlight).length, 0)
      })
    )
  )

  it.effect("a shutdown that times out hands back the rows of every batch in flight", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 1), draft("c", 1), draft("d", 1), draft("e", 1)])
        const scope = yield* Scope.make()
        yield* Relay.start({
          owner: "r1",
          batchSize: 2,
          pipelineDepth: 2,
          shutdownTimeout: Duration.seconds(1),
          publishTimeout: Duration.minutes(1)
        }).pipe(Scope.provide(scope), Effect.provideService(Publisher, { publish: () => Effect.never }))
        yield* settle
        assert.strictEqual(count(yield* rows(world.database), "DISPATCHING"), 4)
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(closing)
        const after = yield* rows(world.database)
        assert.strictEqual(count(after, "PENDING"), 5)
        const handedBack = after.filter((r) => r.lastError === "relay shut down")
        assert.strictEqual(handedBack.length, 4)
        for (const r of handedBack) assert.strictEqual(r.attempts, 0)
      })
    )
  )

  it.effect("a crash with several batches in flight leaves all of them to stale recovery", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 1), draft("c", 1), draft("d", 1)])
        const relay = yield* Relay.make({ owner: "r1", batchSize: 2, pipelineDepth: 2, lease: Duration.seconds(5) })
        const fiber = yield* Effect.forkChild(
          relay.run.pipe(Effect.provideService(Publisher, { publish: () => Effect.never }))
        )
        yield* settle
        yield* Fiber.interrupt(fiber) // the crash: nothing is handed back
        const held = yield* rows(world.database)
        assert.strictEqual(count(held, "DISPATCHING"), 4)
        // Each batch is leased under its own owner id: the relay's, numbered by claim.
        assert.deepStrictEqual([...new Set(held.map((r) => r.leaseOwner))].sort(), ["r1#1", "r1#2"])
        for (const r of held) assert.strictEqual(r.leaseExpiresAt, 5_000)
        assert.strictEqual((yield* relay.inFlight).length, 4, "the relay still knows every row it held")
        yield* TestClock.adjust("5001 millis")
        const recovered = yield* StaleRecovery.runOnce()
        assert.strictEqual(recovered.requeued, 4)
        assert.strictEqual(count(yield* rows(world.database), "PENDING"), 4)
      })
    )
  )

  it.effect("a batch that outlived its lease cannot fail a row a later batch of the same relay re-claimed", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        const inner = yield* Publisher
        const stuck = yield* Deferred.make<void>() // holds the first batch after its claim
        const sending = yield* Deferred.make<void>() // holds the second batch's publish
        let claimsSeen = 0
        let calls = 0
        const hooks: Relay.HooksShape = {
          at: (point) => (point === "afterClaim" && ++claimsSeen === 1 ? Deferred.await(stuck) : Effect.void)
        }
        const publisher = {
          publish: (requests: ReadonlyArray<PublishRequest>) =>
            ++calls === 1
              ? Effect.andThen(Deferred.await(sending), inner.publish(requests))
              : Effect.succeed(
                  requests.map((r) => Result.fail(new RetriablePublishError({ topic: r.topic, reason: "injected" })))
                )
        }
        const relay = yield* Relay.make({
          owner: "r1",
          pipelineDepth: 2,
          lease: Duration.seconds(1),
          publishTimeout: Duration.millis(500),
          pollInterval: Duration.millis(100)
        })
        const fiber = yield* Effect.forkChild(
          relay.run.pipe(Effect.provideService(Relay.Hooks, hooks), Effect.provideService(Publisher, publisher))
        )
        yield* settle
        assert.strictEqual((yield* row(world.database, id)).leaseOwner, "r1#1")
        // The first batch hangs past its lease; stale recovery finds no record and requeues the
        // row; the relay's next poll claims it again, and that batch waits in its publish.
        yield* TestClock.adjust("1001 millis")
        assert.strictEqual((yield* StaleRecovery.runOnce()).requeued, 1)
        yield* TestClock.adjust("100 millis")
        yield* settle
        const reclaimed = yield* row(world.database, id)
        assert.strictEqual(reclaimed.status, "DISPATCHING")
        assert.notStrictEqual(reclaimed.leaseOwner, "r1#1")
        // The stale batch wakes up, its publish fails: its failure write must not apply.
        yield* Deferred.succeed(stuck, undefined)
        yield* settle
        const untouched = yield* row(world.database, id)
        assert.strictEqual(untouched.status, "DISPATCHING")
        assert.strictEqual(untouched.leaseOwner, reclaimed.leaseOwner)
        assert.strictEqual(untouched.attempts, 0)
        yield* Deferred.succeed(sending, undefined)
        yield* settle
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
        assert.deepStrictEqual(yield* logTexts(world.broker), ["a:1"], "sent once")
        yield* Fiber.interrupt(fiber)
      })
    )
  )

  it.effect("pipelineDepth comes from OUTBOX_RELAY_PIPELINE_DEPTH, default 2; below 1 is refused", () =>
    Effect.gen(function* () {
      const read = (env: Record<string, string>) =>
        Relay.config.pipe(Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnvRecord(env)))
      assert.strictEqual((yield* read({})).pipelineDepth, 2)
      assert.strictEqual((yield* read({ OUTBOX_RELAY_PIPELINE_DEPTH: "4" })).pipelineDepth, 4)
      const exit = yield* Effect.exit(Relay.make({ pipelineDepth: 0 }))
      assert.isTrue(Exit.hasDies(exit))
      assert.include(String(exit), "pipelineDepth")
    })
  )
})
