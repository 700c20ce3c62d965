// R4.4 in memory: the reconciler sweeps rows left UNDER_PROCESSING. With the driving group's
// inbox record they move to SUCCESS (the work is not run again); without one past the timeout they
// are reported (gauge + warning with the repair). The runtime starts it for lifecycle consumers.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/testing/TestClock"
import * as Inbox from "../src/Inbox.ts"
import * as Outbox from "../src/Outbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import * as OutboxRuntime from "../src/OutboxRuntime.ts"
import * as Reconciler from "../src/Reconciler.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Topic from "../src/Topic.ts"
import * as Transition from "../src/Transition.ts"
import * as WakeUp from "../src/WakeUp.ts"
import { draft, makeWorld, row } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(body: (world: World) => Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const world = yield* makeWorld()
    return yield* body(world).pipe(Effect.provide(Layer.provideMerge(Inbox.Inbox.layer, world.layer)))
  })

const billing: Reconciler.Driver = { groupId: "billing", topics: ["orders"] }

// A row as a consumer leaves it when it dies after `UNDER_PROCESSING` (and maybe after its inbox
// commit): published with a receipt, then started. No record is put on the broker.
const startedRow = (key: string, receiptOffset: string) =>
  Effect.gen(function* () {
    const [id] = yield* Outbox.enqueueAutocommit([draft(key, 1)])
    const claimed = yield* Transition.claim({ owner: "relay", limit: 10, maxPerKey: 10, leaseMillis: 30_000 })
    assert.isTrue(claimed.some((r) => r.id === id))
    yield* Transition.markPublished([{ id: id!, receipt: { topic: "orders", partition: 0, offset: receiptOffset } }])
    const started = yield* Transition.startProcessing(id!)
    assert.strictEqual(started.outcome, "applied")
    return id!
  })

const processedBy = (group: string, identity: string) => Inbox.processOnce({ consumer: group, identity }, Effect.void)

describe("Reconciler (R4.4)", () => {
  it.effect("an UNDER_PROCESSING row with the driving group's inbox record moves to SUCCESS", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const done = yield* startedRow("a", "0")
        const other = yield* startedRow("b", "1")
        yield* processedBy("billing", Inbox.eventIdentity(done))
        // processed by another group only: not proof for the driving group
        yield* processedBy("audit", Inbox.eventIdentity(other))
        const before = yield* Metric.value(Telemetry.reconciled)
        yield* TestClock.adjust("2 minutes")
        const result = yield* Reconciler.runOnce([billing])
        assert.deepStrictEqual(result.reconciled, [done])
        assert.strictEqual(result.examined, 2)
        assert.strictEqual((yield* row(world.database, done)).status, "SUCCESS")
        assert.strictEqual((yield* row(world.database, other)).status, "UNDER_PROCESSING")
        assert.strictEqual((yield* Metric.value(Telemetry.reconciled)).count, before.count + 1)
        const history = (yield* world.database.control.history).filter((c) => c.id === done)
        assert.deepStrictEqual(
          history.slice(-1).map((c) => `${c.from}->${c.to}`),
          ["UNDER_PROCESSING->SUCCESS"]
        )
      })
    )
  )

  it.effect("rows younger than minAge are left to their consumer, even when processed", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* startedRow("a", "0")
        yield* processedBy("billing", Inbox.eventIdentity(id))
        yield* TestClock.adjust("30 seconds")
        const result = yield* Reconciler.runOnce([billing], { minAge: Duration.minutes(1) })
        assert.strictEqual(result.examined, 0)
        assert.strictEqual((yield* row(world.database, id)).status, "UNDER_PROCESSING")
        yield* TestClock.adjust("31 seconds")
        assert.deepStrictEqual((yield* Reconciler.runOnce([billing])).reconciled, [id])
      })
    )
  )

  it.effect("a group deduping by offset is matched by the row's receipt", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* startedRow("a", "7")
        yield* processedBy("billing", Inbox.offsetIdentity({ topic: "orders", partition: 0, offset: "7" }))
        yield* TestClock.adjust("2 minutes")
        const byEvent = yield* Reconciler.runOnce([billing])
        assert.deepStrictEqual(byEvent.reconciled, [], "an event-id group does not take an offset record")
        const byOffset = yield* Reconciler.runOnce([{ ...billing, identity: "offset" }])
        assert.deepStrictEqual(byOffset.reconciled, [id])
        assert.strictEqual((yield* row(world.database, id)).status, "SUCCESS")
      })
    )
  )

  it.effect("rows stuck at the head do not hide a processed row behind them: the sweep pages by seq", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const stuckIds = [yield* startedRow("a", "0"), yield* startedRow("b", "1"), yield* startedRow("c", "2")]
        const done = yield* startedRow("d", "3")
        yield* processedBy("billing", Inbox.eventIdentity(done))
        yield* TestClock.adjust("20 minutes")
        const result = yield* Reconciler.runOnce([billing], { batchSize: 2 })
        assert.strictEqual(result.examined, 4)
        assert.deepStrictEqual(result.reconciled, [done])
        assert.deepStrictEqual(
          result.stuck.map((r) => r.id),
          stuckIds
        )
        assert.strictEqual((yield* row(world.database, done)).status, "SUCCESS")
        const capped = yield* Reconciler.runOnce([billing], { batchSize: 1, maxBatchesPerRound: 2 })
        assert.strictEqual(capped.examined, 2, "a round reads at most maxBatchesPerRound pages")
      })
    )
  )

  it.effect("a row without a record past stuckAfter is reported stuck with its repair, and left as it is", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const id = yield* startedRow("a", "3")
        yield* TestClock.adjust("5 minutes")
        const early = yield* Reconciler.runOnce([billing], { stuckAfter: Duration.minutes(15) })
        assert.strictEqual(early.examined, 1)
        assert.deepStrictEqual(early.stuck, [])
        assert.strictEqual((yield* Metric.value(Telemetry.consumerStuck)).value, 0)
        yield* TestClock.adjust("11 minutes")
        const late = yield* Reconciler.runOnce([billing], { stuckAfter: Duration.minutes(15) })
        assert.deepStrictEqual(
          late.stuck.map((r) => r.id),
          [id]
        )
        assert.strictEqual((yield* Metric.value(Telemetry.consumerStuck)).value, 1)
        assert.strictEqual((yield* row(world.database, id)).status, "UNDER_PROCESSING")
        const hint = Reconciler.repairHint(late.stuck[0]!)
        assert.include(hint, `effect-outbox inspect ${id}`)
        assert.include(hint, `effect-outbox dlt replay orders.DLT --event-id ${id} --execute`)
        assert.include(hint, "orders/0@3")
        // rows of a topic no lifecycle group drives are not this sweep's business
        const none = yield* Reconciler.runOnce([{ groupId: "billing", topics: ["invoices"] }])
        assert.deepStrictEqual(none.stuck, [])
        assert.strictEqual((yield* Metric.value(Telemetry.consumerStuck)).value, 0)
      })
    )
  )
})

const Order = Schema.Struct({ n: Schema.Int })
const Orders = Topic.make({ name: "orders", schema: Order, key: (o) => String(o.n) })

describe("OutboxRuntime starts the reconciler", () => {
  const runtimeWith = (database: InMemoryDatabase.Database, lifecycle: boolean) =>
    OutboxRuntime.layer({
      relay: false,
      staleRecovery: false,
      retention: false,
      inboxRetention: false,
      metricsInterval: false,
      reconciler: { minAge: Duration.zero, interval: Duration.millis(20) },
      consumers: [
        OutboxRuntime.consumer(
          Topic.consumer(Orders, { groupId: "billing", fromBeginning: true, lifecycle, handler: () => Effect.void })
        )
      ]
    }).pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          InMemoryDatabase.layerFrom(database),
          WakeUp.layerMemory,
          InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 1 } })
        )
      )
    )

  const stuckProcessedRow = (database: InMemoryDatabase.Database) =>
    Effect.gen(function* () {
      const id = yield* startedRow("a", "0")
      yield* processedBy("billing", Inbox.eventIdentity(id))
      return id
    }).pipe(
      Effect.provide(
        Layer.provideMerge(
          Layer.merge(Inbox.Inbox.layer, Outbox.layerWith({ maxPayloadBytes: 1_000 })),
          Layer.merge(InMemoryDatabase.layerFrom(database), WakeUp.layerMemory)
        )
      )
    )

  const statusAfter = (database: InMemoryDatabase.Database, id: EventId, lifecycle: boolean) =>
    Effect.gen(function* () {
      // The record is not on the broker: only the sweep can finish the row.
      const deadline = Date.now() + (lifecycle ? 10_000 : 1_500)
      while (Date.now() < deadline) {
        if ((yield* row(database, id)).status === "SUCCESS") break
        yield* Effect.sleep("20 millis")
      }
      return (yield* row(database, id)).status
    }).pipe(Effect.provide(runtimeWith(database, lifecycle)), Effect.scoped)

  it.live("with a lifecycle consumer declared, a processed row left UNDER_PROCESSING ends SUCCESS", () =>
    Effect.gen(function* () {
      const database = yield* InMemoryDatabase.make
      const id = yield* stuckProcessedRow(database)
      assert.strictEqual(yield* statusAfter(database, id, true), "SUCCESS")
    })
  )

  it.live("with only lifecycle-off consumers, no sweep runs", () =>
    Effect.gen(function* () {
      const database = yield* InMemoryDatabase.make
      const id = yield* stuckProcessedRow(database)
      assert.strictEqual(yield* statusAfter(database, id, false), "UNDER_PROCESSING")
    })
  )
})
