import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/testing/TestClock"
import { BrokerUnavailableError } from "../src/Errors.ts"
import * as Outbox from "../src/Outbox.ts"
import type { OutboxMessage } from "../src/OutboxMessage.ts"
import { Publisher, type PublishOutcome, type PublishRequest } from "../src/Publisher.ts"
import * as Relay from "../src/Relay.ts"
import * as Transition from "../src/Transition.ts"
import { draft, logTexts, makeWorld, row, rows } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(body: (world: World) => Effect.Effect<A, E, any>, topics?: Record<string, number>) =>
  Effect.gen(function* () {
    const world = yield* makeWorld(topics)
    return yield* body(world).pipe(Effect.provide(world.layer))
  })

const statuses = (all: ReadonlyArray<OutboxMessage>) => all.map((r) => r.status)

// A fixed backoff keeps availableAt assertions exact.
const fixed = Schedule.spaced("100 millis")

// A broker that cannot be reached: every record gets BrokerUnavailableError.
const unavailable = {
  publish: (requests: ReadonlyArray<PublishRequest>) =>
    Effect.succeed(
      requests.map(
        (r): PublishOutcome =>
          Result.fail(new BrokerUnavailableError({ topic: r.topic, reason: "connection refused (test)" }))
      )
    )
}

describe("Relay", () => {
  it.effect("publishes a whole batch in ONE publish call and records every receipt (R1.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const ids = yield* Outbox.enqueueAutocommit([
          draft("a", 1),
          draft("b", 1),
          draft("a", 2),
          draft(null, 1),
          draft("c", 1)
        ])
        const inner = yield* Publisher
        let calls = 0
        const counting = {
          publish: (requests: Parameters<typeof inner.publish>[0]) => {
            calls++
            return inner.publish(requests)
          }
        }
        const relay = yield* Relay.make({ owner: "r1" })
        const result = yield* relay.runOnce.pipe(Effect.provideService(Publisher, counting))
        assert.strictEqual(calls, 1)
        assert.deepStrictEqual(result, { claimed: 5, published: 5, retried: 0, failed: 0, heldBack: 0 })
        const records = yield* world.broker.control.records("orders")
        for (const id of ids) {
          const stored = yield* row(world.database, id)
          assert.strictEqual(stored.status, "PUBLISHED")
          const record = records.find(
            (r) => r.partition === stored.receipt!.partition && r.offset === stored.receipt!.offset
          )
          assert.strictEqual(record?.headers["event-id"], id)
        }
      })
    )
  )

  it.effect("never hands rows of one key to two relays at once, and publishes each key in creation order (R1.4)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2), draft("b", 1), draft("a", 3), draft("b", 2)])
        const first = yield* Relay.make({ owner: "r1", maxPerKey: 1 })
        const second = yield* Relay.make({ owner: "r2", maxPerKey: 1 })
        // r1 claims a:1 and b:1 and stops (crash after claim); r2 finds nothing claimable.
        const crash = Effect.provideService(Relay.Hooks, {
          at: (point) => (point === "afterClaim" ? Effect.interrupt : Effect.void)
        })
        const exit = yield* Effect.exit(first.runOnce.pipe(crash))
        assert.isTrue(Exit.hasInterrupts(exit))
        assert.strictEqual((yield* second.runOnce).claimed, 0)
        assert.deepStrictEqual(statuses(yield* rows(world.database)), [
          "DISPATCHING",
          "PENDING",
          "DISPATCHING",
          "PENDING",
          "PENDING"
        ])
      })
    )
  )

  it.effect("drains several keys across batches in per-key order", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([
          draft("a", 1),
          draft("b", 1),
          draft("a", 2),
          draft("a", 3),
          draft("b", 2),
          draft("a", 4)
        ])
        const relay = yield* Relay.make({ owner: "r1", batchSize: 2, maxPerKey: 1 })
        for (let i = 0; i < 6; i++) yield* relay.runOnce
        const texts = yield* logTexts(world.broker)
        assert.deepStrictEqual(
          texts.filter((t) => t.startsWith("a:")),
          ["a:1", "a:2", "a:3", "a:4"]
        )
        assert.deepStrictEqual(
          texts.filter((t) => t.startsWith("b:")),
          ["b:1", "b:2"]
        )
      })
    )
  )

  it.effect("a retriable failure goes back to PENDING with attempts+1 and availableAt from the backoff schedule", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* world.broker.control.failPublish({ fault: "retriable", count: 1 })
        const relay = yield* Relay.make({ owner: "r1", backoff: fixed })
        assert.strictEqual((yield* relay.runOnce).retried, 1)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.attempts, 1)
        assert.strictEqual(stored.availableAt, 100)
        assert.include(stored.lastError!, "RetriablePublishError")
        assert.strictEqual((yield* relay.runOnce).claimed, 0, "not before its backoff elapsed")
        yield* TestClock.adjust("100 millis")
        assert.strictEqual((yield* relay.runOnce).published, 1)
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
      })
    )
  )

  it.effect("gives up after maxAttempts with a reason (R2.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* world.broker.control.failPublish({ fault: "retriable", count: 10 })
        const relay = yield* Relay.make({ owner: "r1", backoff: fixed, maxAttempts: 3 })
        for (let i = 0; i < 3; i++) {
          yield* relay.runOnce
          yield* TestClock.adjust("100 millis")
        }
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.strictEqual(stored.attempts, 3)
        assert.include(stored.lastError!, "gave up after 3 attempts")
      })
    )
  )

  it.effect("a permanent failure is FAILURE at once, and holds back the later rows of its key only", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const [a1, a2, b1] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2), draft("b", 1)])
        // a's rows share a partition batch; fail only that batch.
        yield* world.broker.control.setPublishHook((batch) =>
          batch.requests.some((r) => r.key === "a") ? "permanent" : undefined
        )
        const relay = yield* Relay.make({ owner: "r1" })
        const result = yield* relay.runOnce
        assert.deepStrictEqual({ ...result }, { claimed: 3, published: 1, retried: 0, failed: 1, heldBack: 1 })
        assert.strictEqual((yield* row(world.database, a1!)).status, "FAILURE")
        const held = yield* row(world.database, a2!)
        assert.strictEqual(held.status, "PENDING")
        assert.strictEqual(held.attempts, 0, "a held-back row is not charged an attempt")
        assert.include(held.lastError!, `held back behind failed row ${a1}`)
        assert.strictEqual((yield* row(world.database, b1!)).status, "PUBLISHED")
        // By default the failed head blocks its key: a2 waits for an operator.
        yield* world.broker.control.setPublishHook(undefined)
        assert.strictEqual((yield* relay.runOnce).claimed, 0)
        assert.strictEqual((yield* row(world.database, a2!)).status, "PENDING")
        // With failedHead "skip" (the old rule) the younger row goes on without it.
        const skipping = yield* Relay.make({ owner: "r2", failedHead: "skip" })
        assert.strictEqual((yield* skipping.runOnce).published, 1)
        assert.strictEqual((yield* row(world.database, a2!)).status, "PUBLISHED")
      })
    )
  )

  it.effect("a FAILURE head blocks its key until requeued; then the key follows in order", () =>
    inWorld(
      (world) =>
        Effect.gen(function* () {
          const [a1, a2, a3] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2), draft("a", 3)])
          yield* world.broker.control.failPublish({ fault: "permanent", count: 1 })
          const relay = yield* Relay.make({ owner: "r1" })
          yield* relay.runOnce
          assert.strictEqual((yield* row(world.database, a1!)).status, "FAILURE")
          yield* Outbox.enqueueAutocommit(draft("a", 4))
          for (let i = 0; i < 3; i++) assert.strictEqual((yield* relay.runOnce).claimed, 0, "the key waits")
          yield* Transition.requeue({ ids: [a1!], operator: "test", reason: "fixed" })
          yield* relay.runOnce
          for (const id of [a1!, a2!, a3!]) assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
          assert.deepStrictEqual(yield* logTexts(world.broker), ["a:1", "a:2", "a:3", "a:4"])
        }),
      { orders: 1 }
    )
  )

  it.effect("a broker-unavailable error backs off without counting an attempt, however long it lasts (H1)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        const relay = yield* Relay.make({ owner: "r1", maxAttempts: 2, outageBackoff: fixed })
        for (let i = 0; i < 5; i++) {
          const result = yield* relay.runOnce.pipe(Effect.provideService(Publisher, unavailable))
          assert.strictEqual(result.retried, 1)
          const stored = yield* row(world.database, id)
          assert.strictEqual(stored.status, "PENDING")
          assert.strictEqual(stored.attempts, 0, "an outage counts no attempt")
          assert.include(stored.lastError!, "BrokerUnavailableError")
          yield* TestClock.adjust("100 millis")
        }
        assert.strictEqual((yield* relay.runOnce).published, 1)
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
      })
    )
  )

  it.effect("while the broker is unavailable the loop claims nothing until the outage backoff passed", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(draft("a", 1))
        let calls = 0
        const counting = {
          publish: (requests: Parameters<typeof unavailable.publish>[0]) => {
            calls++
            return unavailable.publish(requests)
          }
        }
        const scope = yield* Scope.make()
        yield* Relay.start({
          owner: "r1",
          pollInterval: Duration.millis(100),
          outageBackoff: Schedule.spaced("10 seconds")
        }).pipe(Scope.provide(scope), Effect.provideService(Publisher, counting))
        for (let i = 0; i < 90; i++) yield* TestClock.adjust("100 millis")
        assert.strictEqual(calls, 1, "one publish in 9 s: the relay waits out the outage backoff")
        for (let i = 0; i < 20; i++) yield* TestClock.adjust("100 millis")
        assert.strictEqual(calls, 2)
        const stored = (yield* rows(world.database))[0]!
        assert.strictEqual(stored.attempts, 0)
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("before FAILURE the broker is probed: a record that landed ends PUBLISHED", () =>
    inWorld(
      (world) =>
        Effect.gen(function* () {
          const [landed] = yield* Outbox.enqueueAutocommit([draft("a", 1, { partition: 0 })])
          const [absent] = yield* Outbox.enqueueAutocommit([draft("b", 1, { partition: 1 })])
          // The broker writes a's record, then the acknowledgement is lost; b's batch is refused.
          yield* world.broker.control.setPublishHook((batch) =>
            batch.requests.some((r) => r.key === "a") ? "lost_ack" : "retriable"
          )
          const relay = yield* Relay.make({ owner: "r1", maxAttempts: 1 })
          const result = yield* relay.runOnce
          assert.strictEqual(result.published, 1)
          assert.strictEqual(result.failed, 1)
          const a = yield* row(world.database, landed!)
          assert.strictEqual(a.status, "PUBLISHED", "found on the broker, not FAILURE")
          assert.strictEqual(a.receipt!.offset, "0")
          const b = yield* row(world.database, absent!)
          assert.strictEqual(b.status, "FAILURE")
          assert.include(b.lastError!, "gave up after 1 attempts")
        }),
      { orders: 2 }
    )
  )

  it.effect("sends a key's rows in one batch only while they share a destination", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const [first, second, third] = yield* Outbox.enqueueAutocommit([
          draft("a", 1, { partition: 0 }),
          draft("a", 2, { partition: 1 }),
          draft("a", 3, { partition: 0 })
        ])
        const relay = yield* Relay.make({ owner: "r1" })
        const result = yield* relay.runOnce
        assert.strictEqual(result.published, 1)
        assert.strictEqual(result.heldBack, 2)
        assert.strictEqual((yield* row(world.database, first!)).status, "PUBLISHED")
        yield* relay.runOnce
        yield* relay.runOnce
        assert.strictEqual((yield* row(world.database, second!)).status, "PUBLISHED")
        assert.strictEqual((yield* row(world.database, third!)).status, "PUBLISHED")
      })
    )
  )

  it.effect("an unknown partition fails with a clear reason when the switch is off (R3.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
        const relay = yield* Relay.make({ owner: "r1", unknownPartition: "fail" })
        yield* relay.runOnce
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.include(stored.lastError!, "UnknownPartitionError")
        assert.include(stored.lastError!, "no partition 5")
        assert.include(stored.lastError!, "OUTBOX_RELAY_UNKNOWN_PARTITION")
      })
    )
  )

  it.effect("with the switch on, an unknown partition grows the topic and is retried (R3.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
        const relay = yield* Relay.make({ owner: "r1", unknownPartition: "sync", backoff: fixed })
        yield* relay.runOnce
        assert.strictEqual((yield* row(world.database, id)).status, "PENDING")
        assert.strictEqual((yield* world.broker.control.topics).get("orders"), 6)
        yield* TestClock.adjust("100 millis")
        yield* relay.runOnce
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PUBLISHED")
        assert.strictEqual(stored.receipt!.partition, 5)
      })
    )
  )

  it.effect("with the switch on, a partition above OUTBOX_MAX_PARTITION never grows the topic (M4)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
        const relay = yield* Relay.make({ owner: "r1", unknownPartition: "sync", maxPartition: 4, backoff: fixed })
        yield* relay.runOnce
        assert.strictEqual((yield* world.broker.control.topics).get("orders"), 3)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.include(stored.lastError!, "partition 5 is above the maximum 4 (OUTBOX_MAX_PARTITION)")
        assert.include(stored.lastError!, "not grown")
      })
    )
  )

  it.effect("a lost acknowledgement re-sends: at least once, first appearance still in order (R1.5)", () =>
    inWorld(
      (world) =>
        Effect.gen(function* () {
          const [a1, a2] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2)])
          yield* world.broker.control.failPublish({ fault: "lost_ack", count: 1 })
          const relay = yield* Relay.make({ owner: "r1", backoff: fixed })
          yield* relay.runOnce
          assert.deepStrictEqual(statuses(yield* rows(world.database)), ["PENDING", "PENDING"])
          yield* TestClock.adjust("100 millis")
          yield* relay.runOnce
          assert.deepStrictEqual(yield* logTexts(world.broker), ["a:1", "a:2", "a:1", "a:2"])
          assert.strictEqual((yield* row(world.database, a1!)).receipt!.offset, "2")
          assert.strictEqual((yield* row(world.database, a2!)).receipt!.offset, "3")
        }),
      { orders: 1 }
    )
  )

  it.effect("retries exhausted but the probe cannot reach the broker: an outage, not FAILURE", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* world.broker.control.failPublish({ fault: "retriable", count: 1 })
        yield* world.broker.control.failNext({ operation: "probe", count: 1 })
        const relay = yield* Relay.make({ owner: "r1", maxAttempts: 1, outageBackoff: fixed })
        const result = yield* relay.runOnce
        assert.strictEqual(result.failed, 0)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.availableAt, 100, "retried after the outage backoff")
        assert.include(stored.lastError!, "probe before FAILURE failed")
        yield* TestClock.adjust("100 millis")
        assert.strictEqual((yield* relay.runOnce).published, 1)
      })
    )
  )

  it.effect("a row going to FAILURE is logged as a warning naming the event and the reason", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* world.broker.control.failPublish({ fault: "permanent", count: 1, reason: "record too large" })
        const warnings: Array<string> = []
        const capture = Logger.make((options) => {
          if (options.logLevel === "Warn") warnings.push(String((options.message as ReadonlyArray<unknown>)[0]))
        })
        const relay = yield* Relay.make({ owner: "r1" })
        yield* relay.runOnce.pipe(Effect.provide(Logger.layer([capture])))
        assert.strictEqual((yield* row(world.database, id)).status, "FAILURE")
        const line = warnings.find((w) => w.includes(id) && w.includes("-> FAILURE"))
        assert.isDefined(line, warnings.join("\n"))
        assert.include(line!, "record too large")
      })
    )
  )

  it.effect("a publish call that hangs past publishTimeout is an outage: retried, no attempt counted", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        const relay = yield* Relay.make({ owner: "r1", publishTimeout: Duration.seconds(2), backoff: fixed })
        const fiber = yield* Effect.forkChild(
          relay.runOnce.pipe(Effect.provideService(Publisher, { publish: () => Effect.never }))
        )
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.retried, 1)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.attempts, 0)
        assert.include(stored.lastError!, "timed out")
        assert.include(stored.lastError!, "BrokerUnavailableError")
      })
    )
  )

  it.effect("wakes up on enqueue without waiting for the poll interval (R1.6)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        yield* Relay.start({ owner: "r1", pollInterval: Duration.hours(1) }).pipe(Scope.provide(scope))
        yield* TestClock.adjust("1 millis") // let the idle relay subscribe and wait
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        for (let i = 0; i < 20 && (yield* row(world.database, id)).status !== "PUBLISHED"; i++) yield* Effect.yieldNow
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("graceful shutdown finishes the batch in flight", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        const inner = yield* Publisher
        const slow = {
          publish: (requests: Parameters<typeof inner.publish>[0]) =>
            Effect.andThen(Effect.sleep("1 second"), inner.publish(requests))
        }
        const scope = yield* Scope.make()
        const relay = yield* Relay.start({ owner: "r1", shutdownTimeout: Duration.seconds(5) }).pipe(
          Scope.provide(scope),
          Effect.provideService(Publisher, slow)
        )
        yield* TestClock.adjust("10 millis")
        assert.strictEqual((yield* relay.inFlight).length, 1)
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(closing)
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
      })
    )
  )

  it.effect("graceful shutdown hands the batch back when it takes longer than shutdownTimeout", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        const scope = yield* Scope.make()
        yield* Relay.start({
          owner: "r1",
          shutdownTimeout: Duration.seconds(1),
          publishTimeout: Duration.minutes(1)
        }).pipe(Scope.provide(scope), Effect.provideService(Publisher, { publish: () => Effect.never }))
        yield* TestClock.adjust("10 millis")
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
        const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(closing)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.attempts, 0)
        assert.strictEqual(stored.lastError, "relay shut down")
      })
    )
  )

  it.effect("the default backoff grows exponentially with jitter and is capped", () =>
    Effect.gen(function* () {
      const schedule = Relay.backoff("100 millis", "1 second")
      const delays: Array<number> = []
      for (let attempt = 1; attempt <= 8; attempt++)
        delays.push(Option.getOrThrow(yield* Relay.retryDelay(schedule, attempt)))
      assert.isAtLeast(delays[0]!, 80)
      assert.isAtMost(delays[0]!, 120)
      assert.isAtLeast(delays[2]!, 320)
      assert.isAtMost(delays[2]!, 480)
      for (const delay of delays) assert.isAtMost(delay, 1_000)
      assert.strictEqual(delays[7], 1_000)
      const finite = Schedule.spaced("10 millis").pipe(Schedule.upTo({ times: 2 }))
      assert.isTrue(Option.isNone(yield* Relay.retryDelay(finite, 3)), "a finished schedule means give up")
    })
  )
})
