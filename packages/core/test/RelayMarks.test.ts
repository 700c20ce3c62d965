// The pipelined relay's marks as a group commit: batches whose outcome is ready while a mark
// statement runs are written together in the next statement, a lone batch is written at once,
// and a failed group statement leaves every batch in it to stale recovery without stopping
// the relay.
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { StoreError } from "../src/Errors.ts"
import * as Outbox from "../src/Outbox.ts"
import type { OutboxMessage } from "../src/OutboxMessage.ts"
import { OutboxStore, type TransitionRequest } from "../src/OutboxStore.ts"
import * as Relay from "../src/Relay.ts"
import { draft, logTexts, makeWorld, rows } from "./support/outboxEnv.ts"

type World = Effect.Success<ReturnType<typeof makeWorld>>

const inWorld = <A, E>(body: (world: World) => Effect.Effect<A, E, Layer.Success<World["layer"]>>) =>
  Effect.gen(function* () {
    const world = yield* makeWorld({ orders: 1 })
    return yield* body(world).pipe(Effect.provide(world.layer))
  })

const count = (all: ReadonlyArray<OutboxMessage>, status: OutboxMessage["status"]) =>
  all.filter((r) => r.status === status).length

// Lets forked fibers run without moving the clock past anything that matters.
const settle = Effect.gen(function* () {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/**
 * The store with its `transition` calls recorded (the rows each call moves) and the first
 * call held at a gate until `open`; `fail(n)` makes the n-th call fail without writing.
 */
const gatedMarks = (failCall?: number) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const gate = yield* Deferred.make<void>()
    const calls: Array<ReadonlyArray<string>> = []
    const gated = OutboxStore.of({
      ...store,
      transition: (requests: ReadonlyArray<TransitionRequest>) =>
        Effect.gen(function* () {
          calls.push(requests.map((r) => `${r.to}`))
          const n = calls.length
          if (n === 1) yield* Deferred.await(gate)
          if (n === failCall) {
            return yield* new StoreError({ operation: "transition", reason: "connection lost", kind: "unavailable" })
          }
          return yield* store.transition(requests)
        })
    })
    return { store: gated, calls, open: Deferred.succeed(gate, undefined) }
  })

describe("Relay marks", () => {
  it.effect("batches whose outcome is ready while a mark statement runs are marked together in the next one", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(["a", "b", "c", "d", "e", "f"].map((key) => draft(key, 1)))
        const marks = yield* gatedMarks()
        const scope = yield* Scope.make()
        yield* Relay.start({ owner: "r1", batchSize: 2, pipelineDepth: 3, pollInterval: Duration.hours(1) }).pipe(
          Scope.provide(scope),
          Effect.provideService(OutboxStore, marks.store)
        )
        yield* settle
        // Batch 1's mark is in its statement; batches 2 and 3 are published and wait behind it.
        assert.deepStrictEqual(marks.calls, [["PUBLISHED", "PUBLISHED"]])
        assert.strictEqual(count(yield* rows(world.database), "DISPATCHING"), 6)
        assert.strictEqual((yield* logTexts(world.broker)).length, 6)

        yield* marks.open
        yield* settle
        // One more statement for both waiting batches, not one each.
        assert.deepStrictEqual(marks.calls, [
          ["PUBLISHED", "PUBLISHED"],
          ["PUBLISHED", "PUBLISHED", "PUBLISHED", "PUBLISHED"]
        ])
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 6)
        yield* Scope.close(scope, Exit.void)
      })
    )
  )

  it.effect("a lone batch is marked at once, in a statement of its own", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 1)])
        const marks = yield* gatedMarks()
        yield* marks.open
        const relay = yield* Relay.make({ owner: "r1", batchSize: 10 })
        const result = yield* relay.runOnce.pipe(Effect.provideService(OutboxStore, marks.store))
        assert.strictEqual(result.published, 2)
        assert.deepStrictEqual(marks.calls, [["PUBLISHED", "PUBLISHED"]])
        assert.strictEqual(count(yield* rows(world.database), "PUBLISHED"), 2)
      })
    )
  )

  it.effect("a failed group statement leaves each of its batches' rows DISPATCHING; the relay goes on", () =>
    inWorld((world) =>
      Effect.gen(function* () {
        yield* Outbox.enqueueAutocommit(["a", "b", "c", "d", "e", "f"].map((key) => draft(key, 1)))
        const marks = yield* gatedMarks(2)
        const scope = yield* Scope.make()
        const relay = yield* Relay.start({
          owner: "r1",
          batchSize: 2,
          pipelineDepth: 3,
          pollInterval: Duration.hours(1)
        }).pipe(Scope.provide(scope), Effect.provideService(OutboxStore, marks.store))
        yield* settle
        yield* marks.open
        yield* settle
        const after = yield* rows(world.database)
        assert.deepStrictEqual(
          after.filter((r) => r.status === "DISPATCHING").map((r) => r.key),
          ["c", "d", "e", "f"],
          "the group's rows wait for stale recovery under their own batches' leases"
        )
        assert.deepStrictEqual(
          after.filter((r) => r.status === "PUBLISHED").map((r) => r.key),
          ["a", "b"]
        )
        assert.strictEqual((yield* relay.inFlight).length, 0, "failed batches left the relay's hands")
        // The relay is still running: a new event is claimed, published and marked.
        yield* Outbox.enqueueAutocommit(draft("g", 1))
        yield* settle
        assert.strictEqual((yield* rows(world.database)).find((r) => r.key === "g")?.status, "PUBLISHED")
        yield* Scope.close(scope, Exit.void)
      })
    )
  )
})
