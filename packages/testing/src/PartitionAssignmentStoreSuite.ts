/**
 * The conformance suite of the `PartitionAssignmentStore` port (sequential assignment, R6.1).
 * Each test builds a fresh layer.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = PartitionAssignmentStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** `reserve` joins an ambient transaction (a rolled-back user creation leaves no assignment). */
  readonly transactional?: boolean
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

const asObject = (counts: ReadonlyMap<number, number>) => Object.fromEntries([...counts].sort((a, b) => a[0] - b[0]))

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { transactional: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services>) =>
    it.live(title, () => Effect.provide(body, options.layer()), timeout)

  describe(`${name} (PartitionAssignmentStore conformance)`, () => {
    test(
      "the first owner of a topic gets partition 0",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        const reservation = yield* store.reserve({ topic: "mail", ownerId: "user-1", maxPerPartition: 3 })
        assert.deepStrictEqual(reservation, { topic: "mail", ownerId: "user-1", partition: 0, created: true })
        assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 1 })
      })
    )

    test(
      "owners fill partition 0 up to capacity, then the next partition",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        const partitions: Array<number> = []
        for (let i = 0; i < 7; i++) {
          partitions.push((yield* store.reserve({ topic: "mail", ownerId: `user-${i}`, maxPerPartition: 3 })).partition)
        }
        assert.deepStrictEqual(partitions, [0, 0, 0, 1, 1, 1, 2])
        assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 3, 1: 3, 2: 1 })
      })
    )

    test(
      "reserve is idempotent per owner",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
        const first = yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
        const again = yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
        assert.deepStrictEqual(first, { topic: "mail", ownerId: "b", partition: 1, created: true })
        assert.deepStrictEqual(again, { topic: "mail", ownerId: "b", partition: 1, created: false })
        assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 1, 1: 1 })
      })
    )

    test(
      "lookup finds an owner's partition and None for an unknown owner",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        assert.isTrue(Option.isNone(yield* store.lookup("mail", "nobody")))
        yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
        yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
        assert.deepStrictEqual(yield* store.lookup("mail", "b"), Option.some(1))
        assert.isTrue(Option.isNone(yield* store.lookup("other-topic", "b")))
      })
    )

    test(
      "topics are independent",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
        const other = yield* store.reserve({ topic: "chat", ownerId: "a", maxPerPartition: 1 })
        assert.strictEqual(other.partition, 0)
        assert.isTrue(other.created)
        assert.deepStrictEqual(asObject(yield* store.counts("chat")), { 0: 1 })
        assert.deepStrictEqual(asObject(yield* store.counts("nothing-here")), {})
      })
    )

    test(
      "a higher capacity lets the lowest partition with room take the next owner",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        for (const owner of ["a", "b", "c"]) yield* store.reserve({ topic: "mail", ownerId: owner, maxPerPartition: 2 })
        const next = yield* store.reserve({ topic: "mail", ownerId: "d", maxPerPartition: 3 })
        assert.strictEqual(next.partition, 0)
        const after = yield* store.reserve({ topic: "mail", ownerId: "e", maxPerPartition: 3 })
        assert.strictEqual(after.partition, 1)
      })
    )

    test(
      "50 concurrent reservations with capacity 7 fill partitions 0..6 exactly and put the rest on 7",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        const owners = Array.from({ length: 50 }, (_, i) => `user-${i}`)
        const reservations = yield* Effect.forEach(
          owners,
          (ownerId) => store.reserve({ topic: "mail", ownerId, maxPerPartition: 7 }),
          { concurrency: "unbounded" }
        )
        assert.isTrue(reservations.every((r) => r.created))
        assert.deepStrictEqual(asObject(yield* store.counts("mail")), {
          0: 7,
          1: 7,
          2: 7,
          3: 7,
          4: 7,
          5: 7,
          6: 7,
          7: 1
        })
        for (const r of reservations)
          assert.deepStrictEqual(yield* store.lookup("mail", r.ownerId), Option.some(r.partition))
      })
    )

    test(
      "concurrent reservations by one owner agree on one partition, created once",
      Effect.gen(function* () {
        const store = yield* PartitionAssignmentStore
        yield* store.reserve({ topic: "mail", ownerId: "first", maxPerPartition: 1 })
        const reservations = yield* Effect.forEach(
          Array.from({ length: 10 }, () => "same-owner"),
          (ownerId) => store.reserve({ topic: "mail", ownerId, maxPerPartition: 1 }),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual([...new Set(reservations.map((r) => r.partition))], [1])
        assert.strictEqual(reservations.filter((r) => r.created).length, 1)
        assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 1, 1: 1 })
      })
    )

    if (features.transactional) {
      test(
        "a reservation inside a rolled-back transaction leaves nothing behind",
        Effect.gen(function* () {
          const store = yield* PartitionAssignmentStore
          const transactor = yield* Transactor
          yield* Effect.flip(
            transactor.withTransaction(
              Effect.andThen(
                store.reserve({ topic: "mail", ownerId: "ghost", maxPerPartition: 1 }),
                Effect.fail("user creation failed")
              )
            )
          )
          assert.isTrue(Option.isNone(yield* store.lookup("mail", "ghost")))
          const next = yield* store.reserve({ topic: "mail", ownerId: "real", maxPerPartition: 1 })
          assert.strictEqual(next.partition, 0)
        })
      )
    }
  })
}
