/**
 * The conformance suite of the `InboxStore` port (processed-message records, R4). Each test
 * builds a fresh layer.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { InboxStore, type ProcessedKey } from "@effect-outbox/core/InboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import { T0, uniqueName } from "./internal/conformance.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = InboxStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Two open transactions may record the same key at once; the later one waits and sees the outcome. */
  readonly concurrentTransactions?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  readonly timeout?: number
}

const key = (identity: string, consumer = "billing"): ProcessedKey => ({ consumer, identity })

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { concurrentTransactions: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services>) =>
    it.live(title, () => Effect.provide(body, options.layer()), timeout)

  describe(`${name} (InboxStore conformance)`, () => {
    test(
      "the first record of a key is recorded, the next is a duplicate",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const k = key(`event:${uniqueName("e")}`)
        assert.isFalse(yield* inbox.exists(k))
        assert.strictEqual(yield* inbox.record(k, T0), "recorded")
        assert.isTrue(yield* inbox.exists(k))
        assert.strictEqual(yield* inbox.record(k, T0 + 1), "duplicate")
      })
    )

    test(
      "the key is consumer plus identity: another consumer records the same identity",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const identity = "offset:orders/0/42"
        assert.strictEqual(yield* inbox.record(key(identity, "billing"), T0), "recorded")
        assert.strictEqual(yield* inbox.record(key(identity, "shipping"), T0), "recorded")
        assert.strictEqual(yield* inbox.record(key("offset:orders/0/43", "billing"), T0), "recorded")
        assert.isFalse(yield* inbox.exists(key(identity, "audit")))
      })
    )

    test(
      "a record inside a rolled-back transaction leaves nothing behind",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const transactor = yield* Transactor
        const k = key("event:rolled-back")
        const error = yield* Effect.flip(
          transactor.withTransaction(
            Effect.gen(function* () {
              assert.strictEqual(yield* inbox.record(k, T0), "recorded")
              return yield* Effect.fail("work failed" as const)
            })
          )
        )
        assert.strictEqual(error, "work failed")
        assert.isFalse(yield* inbox.exists(k))
        assert.strictEqual(yield* inbox.record(k, T0), "recorded")
      })
    )

    test(
      "a second record of a key in the same transaction is a duplicate, and both commit as one",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const transactor = yield* Transactor
        const k = key("event:same-tx")
        const outcomes = yield* transactor.withTransaction(Effect.all([inbox.record(k, T0), inbox.record(k, T0)]))
        assert.deepStrictEqual(outcomes, ["recorded", "duplicate"])
        assert.isTrue(yield* inbox.exists(k))
      })
    )

    test(
      "a defect inside the transaction rolls the record back too",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const transactor = yield* Transactor
        const k = key("event:defect")
        const exit = yield* Effect.exit(
          transactor.withTransaction(Effect.andThen(inbox.record(k, T0), Effect.die(new Error("bug"))))
        )
        assert.isTrue(exit._tag === "Failure")
        assert.isFalse(yield* inbox.exists(k))
      })
    )

    test(
      "recordBatch records new keys and reports existing ones as duplicates, in the order given",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const id = uniqueName("b")
        assert.strictEqual(yield* inbox.record(key(`event:${id}-2`), T0), "recorded")
        const keys = [
          key(`event:${id}-3`),
          key(`event:${id}-2`),
          key(`event:${id}-1`),
          key(`event:${id}-2`, "shipping")
        ]
        const outcomes = yield* inbox.recordBatch(keys, T0)
        assert.deepStrictEqual(outcomes, ["recorded", "duplicate", "recorded", "recorded"])
        const found = yield* Effect.forEach(keys, (k) => inbox.exists(k))
        assert.deepStrictEqual(found, [true, true, true, true])
        assert.deepStrictEqual(yield* inbox.recordBatch(keys, T0 + 1), [
          "duplicate",
          "duplicate",
          "duplicate",
          "duplicate"
        ])
        assert.deepStrictEqual(yield* inbox.recordBatch([], T0), [])
      })
    )

    test(
      "recordBatch: a key given twice is recorded the first time, a duplicate the second",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const k = key(`event:${uniqueName("twice")}`)
        const other = key(`event:${uniqueName("other")}`)
        assert.deepStrictEqual(yield* inbox.recordBatch([k, other, k], T0), ["recorded", "recorded", "duplicate"])
        assert.isTrue(yield* inbox.exists(k))
      })
    )

    test(
      "recordBatch inside a rolled-back transaction leaves nothing behind, and sees the transaction's own records",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const transactor = yield* Transactor
        const a = key(`event:${uniqueName("a")}`)
        const b = key(`event:${uniqueName("b")}`)
        const error = yield* Effect.flip(
          transactor.withTransaction(
            Effect.gen(function* () {
              assert.strictEqual(yield* inbox.record(a, T0), "recorded")
              assert.deepStrictEqual(yield* inbox.recordBatch([a, b], T0), ["duplicate", "recorded"])
              return yield* Effect.fail("work failed" as const)
            })
          )
        )
        assert.strictEqual(error, "work failed")
        assert.isFalse(yield* inbox.exists(a))
        assert.isFalse(yield* inbox.exists(b))
        assert.deepStrictEqual(yield* transactor.withTransaction(inbox.recordBatch([b, a], T0)), [
          "recorded",
          "recorded"
        ])
      })
    )

    if (features.concurrentTransactions) {
      test(
        "of two concurrent transactions recording one key, the later sees a duplicate once the first commits",
        Effect.gen(function* () {
          const inbox = yield* InboxStore
          const transactor = yield* Transactor
          const k = key("event:race")
          const recorded = yield* Deferred.make<void>()
          const commit = yield* Deferred.make<void>()
          const first = yield* Effect.forkChild(
            transactor.withTransaction(
              Effect.gen(function* () {
                const outcome = yield* inbox.record(k, T0)
                yield* Deferred.succeed(recorded, undefined)
                yield* Deferred.await(commit)
                return outcome
              })
            )
          )
          yield* Deferred.await(recorded)
          const second = yield* Effect.forkChild(transactor.withTransaction(inbox.record(k, T0)))
          yield* Effect.sleep("50 millis")
          yield* Deferred.succeed(commit, undefined)
          assert.strictEqual(yield* Fiber.join(first), "recorded")
          assert.strictEqual(yield* Fiber.join(second), "duplicate")
        })
      )

      test(
        "of two concurrent transactions recording one key, the later records it when the first rolls back",
        Effect.gen(function* () {
          const inbox = yield* InboxStore
          const transactor = yield* Transactor
          const k = key("event:race-rollback")
          const recorded = yield* Deferred.make<void>()
          const abort = yield* Deferred.make<void>()
          const first = yield* Effect.forkChild(
            Effect.flip(
              transactor.withTransaction(
                Effect.gen(function* () {
                  yield* inbox.record(k, T0)
                  yield* Deferred.succeed(recorded, undefined)
                  yield* Deferred.await(abort)
                  return yield* Effect.fail("abort" as const)
                })
              )
            )
          )
          yield* Deferred.await(recorded)
          const second = yield* Effect.forkChild(transactor.withTransaction(inbox.record(k, T0)))
          yield* Effect.sleep("50 millis")
          yield* Deferred.succeed(abort, undefined)
          assert.strictEqual(yield* Fiber.join(first), "abort")
          assert.strictEqual(yield* Fiber.join(second), "recorded")
          assert.isTrue(yield* inbox.exists(k))
        })
      )

      test(
        "recordBatch waits for a concurrent transaction holding one of its keys and sees its outcome",
        Effect.gen(function* () {
          const inbox = yield* InboxStore
          const transactor = yield* Transactor
          const held = key(`event:${uniqueName("held")}`)
          const free = key(`event:${uniqueName("free")}`)
          const recorded = yield* Deferred.make<void>()
          const commit = yield* Deferred.make<void>()
          const first = yield* Effect.forkChild(
            transactor.withTransaction(
              Effect.gen(function* () {
                yield* inbox.record(held, T0)
                yield* Deferred.succeed(recorded, undefined)
                yield* Deferred.await(commit)
              })
            )
          )
          yield* Deferred.await(recorded)
          const second = yield* Effect.forkChild(transactor.withTransaction(inbox.recordBatch([free, held], T0)))
          yield* Effect.sleep("50 millis")
          assert.isUndefined(second.pollUnsafe())
          yield* Deferred.succeed(commit, undefined)
          yield* Fiber.join(first)
          assert.deepStrictEqual(yield* Fiber.join(second), ["recorded", "duplicate"])
        })
      )
    }

    test(
      "purge deletes at most `limit` records older than the cut-off",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        for (const [i, at] of [T0 - 300, T0 - 200, T0 - 100, T0 + 100].entries()) {
          yield* inbox.record(key(`event:${i}`), at)
        }
        assert.strictEqual(yield* inbox.purge(T0, 2), 2)
        assert.strictEqual(yield* inbox.purge(T0, 2), 1)
        assert.strictEqual(yield* inbox.purge(T0, 2), 0)
        assert.isTrue(yield* inbox.exists(key("event:3")))
        const left = yield* Effect.forEach([0, 1, 2], (i) => inbox.exists(key(`event:${i}`)))
        assert.deepStrictEqual(left, [false, false, false])
        // A purged key may be recorded again.
        assert.strictEqual(yield* inbox.record(key("event:0"), T0 + 200), "recorded")
      })
    )

    test(
      "inbox retention purges a backlog larger than one batch in one round (M1)",
      Effect.gen(function* () {
        const inbox = yield* InboxStore
        const backlog = 1_250
        const keys = Array.from({ length: backlog }, (_, i) => key(`event:old-${i}`))
        for (let i = 0; i < backlog; i += 500) yield* inbox.recordBatch(keys.slice(i, i + 500), T0)
        yield* inbox.record(key("event:young"), Date.now() + 60_000)
        const round = yield* Retention.runInboxOnce(Duration.zero, { batchSize: 100, maxBatchesPerRound: 100 })
        assert.deepStrictEqual(round, { deleted: backlog, behind: false })
        assert.isFalse(yield* inbox.exists(keys[backlog - 1]!))
        assert.isTrue(yield* inbox.exists(key("event:young")))
        // Bounded: a round stops at its cap and says it is behind.
        yield* inbox.recordBatch(keys.slice(0, 300), T0)
        const capped = yield* Retention.runInboxOnce(Duration.zero, { batchSize: 100, maxBatchesPerRound: 2 })
        assert.deepStrictEqual(capped, { deleted: 200, behind: true })
      })
    )
  })
}
