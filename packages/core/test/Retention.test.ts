import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/testing/TestClock"
import * as Outbox from "../src/Outbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import * as Relay from "../src/Relay.ts"
import * as Retention from "../src/Retention.ts"
import * as Transition from "../src/Transition.ts"
import { draft, makeWorld, rows } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(body: (world: World) => Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const world = yield* makeWorld()
    return yield* body(world).pipe(Effect.provide(world.layer))
  })

const ids = (world: World) => Effect.map(rows(world.database), (all) => all.map((r) => `${r.id}:${r.status}`))

// One row in each of PENDING, PUBLISHED, SUCCESS, PUSHED_FAILURE, FAILURE, PREQUEUED.
const seed = Effect.gen(function* () {
  const [published, success, pushed, failed] = yield* Outbox.enqueueAutocommit([
    draft("a", 1),
    draft("b", 1),
    draft("c", 1),
    draft("d", 1)
  ])
  const prequeued = yield* Outbox.enqueueAutocommit(draft("e", 1, { prequeued: true }))
  const relay = yield* Relay.make({ owner: "r1" })
  yield* relay.runOnce
  for (const id of [success!, pushed!]) yield* Transition.startProcessing(id)
  yield* Transition.finishProcessing(success!, "SUCCESS")
  yield* Transition.finishProcessing(pushed!, "PUSHED_FAILURE")
  yield* Transition.apply([{ id: failed!, from: ["PUBLISHED"], to: "UNDER_PROCESSING" }])
  const pending = yield* Outbox.enqueueAutocommit(draft("f", 1))
  return {
    published: published!,
    success: success!,
    pushed: pushed!,
    processing: failed!,
    prequeued,
    pending
  } as Record<string, EventId>
})

describe("Retention (R1.7)", () => {
  it.effect("purges finished rows older than the configured age, and nothing else", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const seeded = yield* seed
        assert.strictEqual(yield* Retention.runOnce({ olderThan: Duration.days(1) }), 0, "nothing is old yet")
        yield* TestClock.adjust(Duration.days(2))
        assert.strictEqual(yield* Retention.runOnce({ olderThan: Duration.days(1) }), 3)
        const left = (yield* rows(world.database)).map((r) => r.id)
        assert.sameMembers(left, [seeded.processing!, seeded.prequeued!, seeded.pending!])
      })
    )
  )

  it.effect("the status set is configurable: keep PUBLISHED rows for consumers that report back", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        const seeded = yield* seed
        yield* TestClock.adjust(Duration.days(2))
        const purged = yield* Retention.runOnce({
          olderThan: Duration.days(1),
          statuses: ["SUCCESS", "PUSHED_FAILURE"]
        })
        assert.strictEqual(purged, 2)
        assert.include(
          (yield* rows(world.database)).map((r) => r.id),
          seeded.published
        )
      })
    )
  )

  it.effect("deletes in bounded batches and stops at the per-round cap", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(Array.from({ length: 7 }, (_, i) => draft(`k${i}`, 1)))
        yield* (yield* Relay.make({ owner: "r1" })).runOnce
        yield* TestClock.adjust(Duration.days(8))
        assert.strictEqual(yield* Retention.runOnce({ batchSize: 2, maxBatchesPerRound: 2 }), 4)
        assert.strictEqual((yield* rows(world.database)).length, 3)
        assert.strictEqual(yield* Retention.runOnce({ batchSize: 2, maxBatchesPerRound: 5 }), 3)
        assert.deepStrictEqual(yield* ids(world), [])
      })
    )
  )

  it.effect("refuses to purge statuses that are not finished", () =>
    inWorld(() =>
      Effect.gen(function* () {
        for (const status of ["PENDING", "DISPATCHING", "PREQUEUED", "UNDER_PROCESSING"] as const) {
          const error = yield* Effect.flip(Retention.runOnce({ statuses: [status] }))
          assert.strictEqual(error._tag, "OutboxValidationError")
          assert.include(error.message, status)
        }
        const bogus = yield* Effect.flip(Retention.runOnce({ statuses: ["DONE" as never] }))
        assert.include(bogus.message, "not an outbox status")
      })
    )
  )

  it.effect("runs on a schedule", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(draft("a", 1))
        yield* (yield* Relay.make({ owner: "r1" })).runOnce
        const fiber = yield* Effect.forkChild(
          Retention.run({ olderThan: Duration.hours(1), interval: Duration.minutes(30) })
        )
        yield* TestClock.adjust(Duration.minutes(30))
        assert.strictEqual((yield* rows(world.database)).length, 1)
        yield* TestClock.adjust(Duration.minutes(60))
        assert.strictEqual((yield* rows(world.database)).length, 0)
        yield* Fiber.interrupt(fiber)
      })
    )
  )

  it.effect("a round that stops at its bound is followed by the next after catchUpInterval, not interval (M1)", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(Array.from({ length: 7 }, (_, i) => draft(`k${i}`, 1)))
        yield* (yield* Relay.make({ owner: "r1" })).runOnce
        yield* TestClock.adjust(Duration.days(8))
        const fiber = yield* Effect.forkChild(
          Retention.run({
            batchSize: 2,
            maxBatchesPerRound: 1,
            interval: Duration.minutes(30),
            catchUpInterval: Duration.seconds(1)
          })
        )
        yield* TestClock.adjust(Duration.millis(1))
        assert.strictEqual((yield* rows(world.database)).length, 5, "one bounded round")
        yield* TestClock.adjust(Duration.seconds(3))
        assert.strictEqual((yield* rows(world.database)).length, 0, "behind: rounds a second apart until caught up")
        yield* Fiber.interrupt(fiber)
      })
    )
  )
})
