import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as References from "effect/References"
import * as Outbox from "../src/Outbox.ts"
import { BEHIND_ITS_HEAD, type EventId } from "../src/OutboxMessage.ts"
import * as Telemetry from "../src/Telemetry.ts"
import * as Transition from "../src/Transition.ts"
import { draft, makeWorld, row } from "./support/outboxEnv.ts"

const receipt = { topic: "orders", partition: 0, offset: "7" }

// Runs `body` against a fresh in-memory world with one enqueued, claimed event.
const withDispatching = <A, E>(
  body: (id: EventId, world: Effect.Success<ReturnType<typeof makeWorld>>) => Effect.Effect<A, E, any>
) =>
  Effect.gen(function* () {
    const world = yield* makeWorld()
    return yield* Effect.gen(function* () {
      const id = yield* Outbox.enqueueAutocommit(draft("k", 1))
      const claimed = yield* Transition.claim({ owner: "relay-1", limit: 10, maxPerKey: 10, leaseMillis: 1_000 })
      assert.deepStrictEqual(
        claimed.map((r) => r.id),
        [id]
      )
      return yield* body(id, world)
    }).pipe(Effect.provide(world.layer))
  })

describe("Transition, the one transition helper (R2.7)", () => {
  it.effect("refuses a move the lifecycle forbids and writes nothing", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(Transition.apply([{ id, from: ["DISPATCHING"], to: "SUCCESS" }]))
        assert.strictEqual(error._tag, "IllegalTransitionError")
        assert.include(error.message, "DISPATCHING -> SUCCESS")
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
      })
    )
  )

  it.effect("refuses a whole batch when one move is illegal", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(
          Transition.apply([
            { id, from: ["DISPATCHING"], to: "PUBLISHED", patch: { receipt } },
            { id, from: ["PENDING"], to: "PUBLISHED" }
          ])
        )
        assert.strictEqual(error._tag, "IllegalTransitionError")
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
      })
    )
  )

  it.effect("refuses to accept a status as 'already advanced' that is not ahead of the target", () =>
    withDispatching((id) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(
          Transition.apply([{ id, from: ["DISPATCHING"], to: "PUBLISHED", acceptIfIn: ["FAILURE"] }])
        )
        assert.strictEqual(error._tag, "IllegalTransitionError")
      })
    )
  )

  it.effect("markPublished records the receipt and clears the lease", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const [outcome] = yield* Transition.markPublished([{ id, receipt }])
        assert.deepStrictEqual(outcome, { id, outcome: "applied", current: "PUBLISHED" })
        const stored = yield* row(world.database, id)
        assert.deepStrictEqual(stored.receipt, receipt)
        assert.isNull(stored.leaseOwner)
      })
    )
  )

  it.effect(
    "a late markPublished on a row processing already advanced is a no-op that keeps the receipt (R2.5, R2.6)",
    () =>
      withDispatching((id, world) =>
        Effect.gen(function* () {
          assert.strictEqual((yield* Transition.startProcessing(id)).outcome, "applied")
          assert.strictEqual((yield* Transition.finishProcessing(id, "SUCCESS")).outcome, "applied")
          const [late] = yield* Transition.markPublished([{ id, receipt }])
          assert.deepStrictEqual(late, { id, outcome: "already_advanced", current: "SUCCESS" })
          const stored = yield* row(world.database, id)
          assert.strictEqual(stored.status, "SUCCESS")
          assert.deepStrictEqual(stored.receipt, receipt)
        })
      )
  )

  it.effect("markPublishFailed only acts for the lease owner", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const [stranger] = yield* Transition.markPublishFailed([
          { id, owner: "relay-2", reason: "timeout", attempts: 1, retryAt: 500 }
        ])
        assert.strictEqual(stranger!.outcome, "rejected")
        const [owner] = yield* Transition.markPublishFailed([
          { id, owner: "relay-1", reason: "timeout", attempts: 1, retryAt: 500 }
        ])
        assert.strictEqual(owner!.outcome, "applied")
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.attempts, 1)
        assert.strictEqual(stored.availableAt, 500)
        assert.strictEqual(stored.lastError, "timeout")
      })
    )
  )

  it.effect("markPublishFailed without a retry time is FAILURE with the reason (R2.3)", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        yield* Transition.markPublishFailed([
          { id, owner: "relay-1", reason: "record too large", attempts: 1, retryAt: null }
        ])
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "FAILURE")
        assert.strictEqual(stored.lastError, "record too large")
      })
    )
  )

  it.effect("processing starts from DISPATCHING or PUBLISHED and reports terminal rows as already advanced", () =>
    withDispatching((id) =>
      Effect.gen(function* () {
        yield* Transition.markPublished([{ id, receipt }])
        assert.strictEqual((yield* Transition.startProcessing(id)).outcome, "applied")
        yield* Transition.finishProcessing(id, "PUSHED_FAILURE", { reason: "handler gave up" })
        const again = yield* Transition.startProcessing(id)
        assert.deepStrictEqual(again, { id, outcome: "already_advanced", current: "PUSHED_FAILURE" })
        const finishAgain = yield* Transition.finishProcessing(id, "SUCCESS")
        assert.deepStrictEqual(finishAgain, { id, outcome: "rejected", current: "PUSHED_FAILURE" })
      })
    )
  )

  it.effect("requeue out of FAILURE is an audited operator action (R2.4)", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        yield* Transition.markPublishFailed([{ id, owner: "relay-1", reason: "bad", attempts: 3, retryAt: null }])
        const lines: Array<{ message: string; annotations: Record<string, unknown> }> = []
        const capture = Logger.make((options) => {
          lines.push({
            message: String((options.message as ReadonlyArray<unknown>)[0]),
            annotations: { ...options.fiber.getRef(References.CurrentLogAnnotations) }
          })
        })
        const outcomes = yield* Transition.requeue({ ids: [id], operator: "alice", reason: "topic fixed" }).pipe(
          Effect.provide(Logger.layer([capture]))
        )
        assert.strictEqual(outcomes[0]!.outcome, "applied")
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "PENDING")
        assert.strictEqual(stored.attempts, 0)
        const audit = lines.find((line) => line.message.startsWith("AUDIT"))
        assert.isDefined(audit)
        assert.include(audit!.message, "alice")
        assert.include(audit!.message, "topic fixed")
        assert.strictEqual(audit!.annotations.operator, "alice")
        assert.strictEqual(audit!.annotations.requeued, id)
      })
    )
  )

  it.effect("requeue leaves rows that are not FAILURE alone", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const [outcome] = yield* Transition.requeue({ ids: [id], operator: "alice", reason: "oops" })
        assert.deepStrictEqual(outcome, { id, outcome: "rejected", current: "DISPATCHING" })
        assert.strictEqual((yield* row(world.database, id)).status, "DISPATCHING")
      })
    )
  )

  it.effect(
    "requeue and skip without an operator or a reason (or requeue to the set-aside time) fail with OutboxValidationError and write nothing",
    () =>
      withDispatching((id, world) =>
        Effect.gen(function* () {
          yield* Transition.markPublishFailed([{ id, owner: "relay-1", reason: "bad", attempts: 3, retryAt: null }])
          const noOperator = yield* Effect.flip(Transition.requeue({ ids: [id], operator: " ", reason: "fixed" }))
          assert.strictEqual(noOperator._tag, "OutboxValidationError")
          assert.strictEqual(noOperator._tag === "OutboxValidationError" && noOperator.field, "operator")
          const noReason = yield* Effect.flip(Transition.skip({ ids: [id], operator: "carol", reason: "" }))
          assert.strictEqual(noReason._tag, "OutboxValidationError")
          assert.strictEqual(noReason._tag === "OutboxValidationError" && noReason.field, "reason")
          const setAsideTime = yield* Effect.flip(
            Transition.requeue({ ids: [id], operator: "alice", reason: "later", availableAt: BEHIND_ITS_HEAD })
          )
          assert.strictEqual(setAsideTime._tag === "OutboxValidationError" && setAsideTime.field, "availableAt")
          assert.strictEqual((yield* row(world.database, id)).status, "FAILURE")
        })
      )
  )

  it.effect("skip out of FAILURE is an audited operator action: SKIPPED, terminal; other rows are left alone", () =>
    withDispatching((id, world) =>
      Effect.gen(function* () {
        const [early] = yield* Transition.skip({ ids: [id], operator: "carol", reason: "too early" })
        assert.deepStrictEqual(early, { id, outcome: "rejected", current: "DISPATCHING" })
        yield* Transition.markPublishFailed([{ id, owner: "relay-1", reason: "bad", attempts: 3, retryAt: null }])
        const lines: Array<{ message: string; annotations: Record<string, unknown> }> = []
        const capture = Logger.make((options) => {
          lines.push({
            message: String((options.message as ReadonlyArray<unknown>)[0]),
            annotations: { ...options.fiber.getRef(References.CurrentLogAnnotations) }
          })
        })
        const outcomes = yield* Transition.skip({ ids: [id], operator: "carol", reason: "order cancelled" }).pipe(
          Effect.provide(Logger.layer([capture]))
        )
        assert.strictEqual(outcomes[0]!.outcome, "applied")
        const stored = yield* row(world.database, id)
        assert.strictEqual(stored.status, "SKIPPED")
        assert.strictEqual(stored.lastError, "skipped by carol: order cancelled")
        const audit = lines.find((line) => line.message.startsWith("AUDIT outbox skip"))
        assert.isDefined(audit)
        assert.strictEqual(audit!.annotations.operator, "carol")
        assert.strictEqual(audit!.annotations.skippedIds, id)
        const [again] = yield* Transition.requeue({ ids: [id], operator: "carol", reason: "undo?" })
        assert.deepStrictEqual(again, { id, outcome: "rejected", current: "SKIPPED" }, "SKIPPED is terminal")
      })
    )
  )

  it.effect("every transition is counted by from/to/outcome", () =>
    withDispatching((id) =>
      Effect.gen(function* () {
        const counter = Metric.withAttributes(Telemetry.transitions, {
          from: "DISPATCHING",
          to: "PUBLISHED",
          outcome: "applied"
        })
        const before = (yield* Metric.value(counter)).count
        yield* Transition.markPublished([{ id, receipt }])
        assert.strictEqual((yield* Metric.value(counter)).count, before + 1)
      })
    )
  )

  it.effect("a batch counts each row under its own from/to/outcome, one per row", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld()
      yield* Effect.gen(function* () {
        const ids = yield* Outbox.enqueueAutocommit([draft("a", 1), draft("b", 2), draft("c", 3)])
        yield* Transition.claim({ owner: "relay-1", limit: 10, maxPerKey: 10, leaseMillis: 1_000 })
        yield* Transition.markPublished([{ id: ids[0]!, receipt }])
        const count = (outcome: string) =>
          Effect.map(
            Metric.value(
              Metric.withAttributes(Telemetry.transitions, { from: "DISPATCHING", to: "PUBLISHED", outcome })
            ),
            (state) => state.count
          )
        const applied = yield* count("applied")
        const rejected = yield* count("rejected")
        // One row already PUBLISHED (so rejected), two DISPATCHING: counted 1 and 2 under their outcomes.
        const outcomes = yield* Transition.markPublished(ids.map((id) => ({ id, receipt })))
        assert.deepStrictEqual(
          outcomes.map((o) => o.outcome),
          ["rejected", "applied", "applied"]
        )
        assert.strictEqual(yield* count("applied"), applied + 2)
        assert.strictEqual(yield* count("rejected"), rejected + 1)
      }).pipe(Effect.provide(world.layer))
    })
  )

  it.effect("at the default log level a batch writes no per-row line", () =>
    withDispatching((id) =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const capture = Logger.make((options) => {
          lines.push(String((options.message as ReadonlyArray<unknown>)[0]))
        })
        yield* Transition.markPublished([{ id, receipt }]).pipe(Effect.provide(Logger.layer([capture])))
        assert.deepStrictEqual(lines, [])
      })
    )
  )

  it.effect("every transition writes a log line (at Debug) naming the row and the move", () =>
    withDispatching((id) =>
      Effect.gen(function* () {
        const lines: Array<string> = []
        const capture = Logger.make((options) => {
          lines.push(`${options.logLevel} ${String((options.message as ReadonlyArray<unknown>)[0])}`)
        })
        yield* Transition.markPublished([{ id, receipt }]).pipe(
          Effect.provide(Logger.layer([capture])),
          Effect.provideService(References.MinimumLogLevel, "Debug")
        )
        assert.deepStrictEqual(lines, [`Debug outbox ${id}: DISPATCHING -> PUBLISHED applied`])
      })
    )
  )

  it.effect("release moves PREQUEUED to PENDING and nothing else", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld()
      yield* Effect.gen(function* () {
        const held = yield* Outbox.enqueueAutocommit(draft("k", 1, { prequeued: true }))
        const pending = yield* Outbox.enqueueAutocommit(draft("k", 2))
        const outcomes = yield* Transition.release([held, pending])
        assert.deepStrictEqual(
          outcomes.map((o) => o.outcome),
          ["applied", "rejected"]
        )
        assert.strictEqual((yield* row(world.database, held)).status, "PENDING")
      }).pipe(Effect.provide(world.layer))
    })
  )
})
