import { assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import * as Transition from "@effect-outbox/core/Transition"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import { draft, makeWorld, row } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(body: (world: World) => Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const world = yield* makeWorld()
    return yield* body(world).pipe(Effect.provide(world.layer))
  })

// A relay that crashes at `point` of its first batch, leaving its rows DISPATCHING.
const crashAt = (point: Relay.CrashPoint) =>
  Effect.gen(function* () {
    const relay = yield* Relay.make({ owner: "crashed" })
    const exit = yield* Effect.exit(
      relay.runOnce.pipe(
        Effect.provideService(Relay.Hooks, { at: (p) => (p === point ? Effect.interrupt : Effect.void) })
      )
    )
    assert.isTrue(Exit.hasInterrupts(exit))
  })

describe("StaleRecovery (R3)", () => {
  it.effect("leaves leases that have not expired alone", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1))
        yield* crashAt("afterPublish")
        const result = yield* StaleRecovery.runOnce()
        assert.strictEqual(result.stale, 0)
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
      })
    )
  )

  it.effect("a crash after the send: the probe finds the record and marks it PUBLISHED with that receipt (R3.2)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1))
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce()
        assert.deepStrictEqual(result, { stale: 1, found: 1, requeued: 0, failed: 0, left: 0 })
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PUBLISHED")
        const [record] = yield* world.broker.control.records("orders")
        assert.strictEqual(record!.headers["event-id"], id)
        assert.strictEqual(stored.receipt!.offset, record!.offset)
        assert.strictEqual(stored.receipt!.partition, record!.partition)
        assert.strictEqual((yield* world.broker.control.records("orders")).length, 1, "no re-send")
      })
    )
  )

  it.effect("a crash before the send: nothing on the broker, so back to PENDING and published again", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1))
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce()
        assert.strictEqual(result.requeued, 1)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.isNull(stored.leaseOwner)
        const relay = yield* Relay.make({ owner: "fresh" })
        assert.strictEqual((yield* relay.runOnce).published, 1)
      })
    )
  )

  it.effect("a probe error leaves the row (and the later rows of its key) for the next round", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const [a1, a2] = yield* Outbox.enqueue([draft("a", 1), draft("a", 2)])
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        yield* world.broker.control.failNext({ operation: "probe", count: 1 })
        const result = yield* StaleRecovery.runOnce({ batchSize: 10 })
        assert.strictEqual(result.left, 2)
        assert.strictEqual((yield* row(world.database, a1!)).status, "DISPATCHING")
        assert.strictEqual((yield* row(world.database, a2!)).status, "DISPATCHING")
        const next = yield* StaleRecovery.runOnce({ batchSize: 10 })
        assert.strictEqual(next.found, 2)
      })
    )
  )

  it.effect("once an earlier row of a key is not found, later rows of that key are requeued even if found", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const [a1, a2] = yield* Outbox.enqueue([draft("a", 1), draft("a", 2)])
        yield* crashAt("afterClaim")
        // a2 (only) reaches the broker, as if a zombie relay had sent it alone.
        const stored2 = yield* row(world.database, a2!)
        const publisher = yield* Publisher
        yield* publisher.publish([{ ...stored2, id: stored2.id }])
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce()
        assert.strictEqual(result.requeued, 2)
        assert.strictEqual((yield* row(world.database, a1!)).status, "PENDING")
        assert.strictEqual((yield* row(world.database, a2!)).status, "PENDING")
      })
    )
  )

  it.effect("does not touch a row another relay re-claimed after the probe", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1))
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        // Between probe and settle, the row is requeued and re-claimed by someone else.
        const store = yield* OutboxStore
        const hooks: StaleRecovery.HooksShape = {
          afterProbe: () =>
            Effect.gen(function* () {
              yield* Transition.requeueStale([{ id, staleOwner: "crashed#1" }]) // the crashed relay's first batch
              yield* Transition.claim({ owner: "other", limit: 1, maxPerKey: 1, leaseMillis: 30_000 })
            }).pipe(Effect.orDie, Effect.provideService(OutboxStore, store))
        }
        yield* StaleRecovery.runOnce().pipe(Effect.provideService(StaleRecovery.Hooks, hooks))
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "DISPATCHING")
        assert.strictEqual(stored.leaseOwner, "other")
      })
    )
  )

  it.effect("unknown partition with the switch off: FAILURE with a clear reason (R3.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1, { partition: 5 }))
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce({ unknownPartition: "fail" })
        assert.strictEqual(result.failed, 1)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.include(stored.lastError!, "no partition 5")
        assert.include(stored.lastError!, "OUTBOX_RELAY_UNKNOWN_PARTITION")
      })
    )
  )

  it.effect("unknown partition with the switch on: grow the topic, then requeue (R3.3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1, { partition: 5 }))
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce({ unknownPartition: "sync" })
        assert.strictEqual(result.requeued, 1)
        assert.strictEqual((yield* world.broker.control.topics).get("orders"), 6)
        assert.strictEqual((yield* row(world.database, id)).status, "PENDING")
      })
    )
  )

  it.effect("unknown partition with the switch on, above OUTBOX_MAX_PARTITION: FAILURE, the topic not grown (M4)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1, { partition: 5 }))
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce({ unknownPartition: "sync", maxPartition: 4 })
        assert.strictEqual(result.failed, 1)
        assert.strictEqual((yield* world.broker.control.topics).get("orders"), 3)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.include(stored.lastError!, "above the maximum 4 (OUTBOX_MAX_PARTITION)")
      })
    )
  )

  it.effect("runs periodically", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueue(draft("a", 1))
        yield* crashAt("afterPublish")
        const fiber = yield* Effect.forkChild(StaleRecovery.run({ interval: Duration.seconds(10) }))
        yield* TestClock.adjust("40 seconds")
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
        yield* Fiber.interrupt(fiber)
      })
    )
  )
})
