import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import { BrokerProbe, type ProbeRequest } from "../src/BrokerProbe.ts"
import { ProbeError } from "../src/Errors.ts"
import * as Outbox from "../src/Outbox.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Relay from "../src/Relay.ts"
import * as StaleRecovery from "../src/StaleRecovery.ts"
import * as Transition from "../src/Transition.ts"
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

// The world's probe, seen through a spy; `fails(request)` turns chosen probes into errors.
const spyProbe = (fails: (request: ProbeRequest) => boolean = () => false) =>
  Effect.gen(function* () {
    const inner = yield* BrokerProbe
    const seen: Array<ProbeRequest> = []
    const probe = BrokerProbe.of({
      find: (request) =>
        Effect.suspend(() => {
          seen.push(request)
          return fails(request)
            ? Effect.fail(new ProbeError({ topic: request.topic, reason: "scan budget exhausted" }))
            : inner.find(request)
        })
    })
    return { seen, provide: Effect.provideService(BrokerProbe, probe) }
  })

describe("StaleRecovery (R3)", () => {
  it.effect("leaves leases that have not expired alone", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const result = yield* StaleRecovery.runOnce()
        const { failed, found, left, requeued, stale } = result
        assert.deepStrictEqual(
          { stale, found, requeued, failed, left },
          { stale: 1, found: 1, requeued: 0, failed: 0, left: 0 }
        )
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
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
        const [a1, a2] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2)])
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
        const [a1, a2] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2)])
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1, { partition: 5 }))
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
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* crashAt("afterPublish")
        const fiber = yield* Effect.forkChild(StaleRecovery.run({ interval: Duration.seconds(10) }))
        yield* TestClock.adjust("40 seconds")
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
        yield* Fiber.interrupt(fiber)
      })
    )
  )
  it.effect("the probe window starts at the claim time, not at the row's creation (H3)", () =>
    inWorld(() =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(draft("a", 1))
        // The row waited three days (a backlog, an operator's requeue) before its claim.
        yield* TestClock.adjust("3 days")
        const claimedAt = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const spy = yield* spyProbe()
        const result = yield* StaleRecovery.runOnce().pipe(spy.provide)
        assert.strictEqual(result.found, 1)
        assert.deepStrictEqual(
          spy.seen.map((r) => r.since),
          [claimedAt]
        )
      })
    )
  )

  it.effect("rows that cannot be probed do not hide the others: rounds page past them (H3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        // Two rows whose probe always fails, then two that can be judged, one lease each... all
        // in one claim here, in seq order; pages of two.
        const [bad1, bad2, good1, good2] = yield* Outbox.enqueueAutocommit([
          draft("x", 1, { topic: "legacy" }),
          draft("y", 1, { topic: "legacy" }),
          draft("a", 1),
          draft("b", 1)
        ])
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const spy = yield* spyProbe((r) => r.topic === "legacy")
        const first = yield* StaleRecovery.runOnce({ batchSize: 2, owner: "r" }).pipe(spy.provide)
        assert.strictEqual(first.left, 2)
        assert.isDefined(first.next)
        const second = yield* StaleRecovery.runOnce({ batchSize: 2, owner: "r" }, { after: first.next }).pipe(
          spy.provide
        )
        assert.strictEqual(second.requeued, 2)
        assert.strictEqual((yield* row(world.database, good1!)).status, "PENDING")
        assert.strictEqual((yield* row(world.database, good2!)).status, "PENDING")
        assert.strictEqual((yield* row(world.database, bad1!)).status, "DISPATCHING")
        assert.strictEqual((yield* row(world.database, bad2!)).status, "DISPATCHING")
        // After the last page the next round starts over from the oldest lease.
        const third = yield* StaleRecovery.runOnce({ batchSize: 2, owner: "r" }, { after: second.next }).pipe(
          spy.provide
        )
        assert.strictEqual(third.left, 2)
      })
    )
  )

  it.effect("a row that still cannot be probed after giveUpAfter is requeued with the reason (H3)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const [a1, a2] = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("a", 2)])
        yield* crashAt("afterClaim")
        yield* TestClock.adjust("31 seconds")
        const spy = yield* spyProbe(() => true)
        const early = yield* StaleRecovery.runOnce({ giveUpAfter: Duration.minutes(5) }).pipe(spy.provide)
        assert.strictEqual(early.left, 2)
        yield* TestClock.adjust("5 minutes")
        const late = yield* StaleRecovery.runOnce({ giveUpAfter: Duration.minutes(5) }).pipe(spy.provide)
        assert.strictEqual(late.requeued, 2)
        assert.strictEqual(late.gaveUp, 1) // a2 follows a1 to keep the key's order
        const head = yield* row(world.database, a1!)
        assert.strictEqual(head.status, "PENDING")
        assert.include(head.lastError!, "could not be probed")
        assert.include(head.lastError!, "scan budget exhausted")
        assert.strictEqual((yield* row(world.database, a2!)).status, "PENDING")
      })
    )
  )

  it.effect("one recoverer at a time: while one holds the recovery lease, another's round changes nothing", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const store = yield* OutboxStore
        assert.isTrue((yield* store.acquireRecoveryLease({ owner: "relay-1", ttlMillis: 120_000 })).acquired)
        const other = yield* StaleRecovery.runOnce({ owner: "relay-2" })
        assert.strictEqual(other.heldBy, "relay-1")
        assert.strictEqual(other.stale, 0)
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
        // A one-off round (the CLI) waits its turn too, and leaves the holder's lease alone.
        assert.strictEqual((yield* StaleRecovery.runOnce()).heldBy, "relay-1")
        // The holder's lease lapses (it crashed): the other takes over.
        yield* TestClock.adjust("2 minutes")
        const next = yield* StaleRecovery.runOnce({ owner: "relay-2" })
        assert.strictEqual(next.found, 1)
        assert.strictEqual((yield* row(world.database, id)).status, "PUBLISHED")
      })
    )
  )

  it.effect("a lease lost while probing: nothing is settled", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const store = yield* OutboxStore
        const hooks: StaleRecovery.HooksShape = {
          // The round outlasts its lease and another recoverer takes it over.
          afterProbe: () =>
            Effect.gen(function* () {
              yield* TestClock.adjust("3 minutes")
              yield* store.acquireRecoveryLease({ owner: "usurper", ttlMillis: 120_000 })
            }).pipe(Effect.orDie)
        }
        const result = yield* StaleRecovery.runOnce({ owner: "slow" }).pipe(
          Effect.provideService(StaleRecovery.Hooks, hooks)
        )
        assert.strictEqual(result.heldBy, "usurper")
        assert.strictEqual(result.found, 0)
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
      })
    )
  )

  it.effect("a found mark checks the lease it judged; counts report what applied, not what was tried", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* crashAt("afterPublish")
        yield* TestClock.adjust("31 seconds")
        const store = yield* OutboxStore
        const hooks: StaleRecovery.HooksShape = {
          // Between probe and settle, the row is requeued and re-claimed: a new dispatch.
          afterProbe: () =>
            Effect.gen(function* () {
              yield* Transition.requeueStale([{ id, staleOwner: "crashed#1" }])
              yield* Transition.claim({ owner: "other", limit: 1, maxPerKey: 1, leaseMillis: 30_000 })
            }).pipe(Effect.orDie, Effect.provideService(OutboxStore, store))
        }
        const result = yield* StaleRecovery.runOnce().pipe(Effect.provideService(StaleRecovery.Hooks, hooks))
        assert.strictEqual(result.found, 0)
        assert.strictEqual(result.skipped, 1)
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "DISPATCHING")
        assert.strictEqual(stored.leaseOwner, "other")
      })
    )
  )

  it.effect("rounds of `run` page on from where the last one ended", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const ids = yield* Outbox.enqueueAutocommit([draft("x", 1, { topic: "legacy" }), draft("a", 1), draft("b", 1)])
        yield* crashAt("afterClaim")
        const spy = yield* spyProbe((r) => r.topic === "legacy")
        const fiber = yield* Effect.forkChild(
          StaleRecovery.run({ interval: Duration.seconds(10), batchSize: 1 }).pipe(spy.provide)
        )
        yield* TestClock.adjust("60 seconds")
        assert.strictEqual((yield* row(world.database, ids[0]!)).status, "DISPATCHING")
        assert.strictEqual((yield* row(world.database, ids[1]!)).status, "PENDING")
        assert.strictEqual((yield* row(world.database, ids[2]!)).status, "PENDING")
        yield* Fiber.interrupt(fiber)
        // Interrupted, it gave its lease back: another recoverer may start at once.
        const store = yield* OutboxStore
        assert.isTrue((yield* store.acquireRecoveryLease({ owner: "next", ttlMillis: 1_000 })).acquired)
      })
    )
  )
})
