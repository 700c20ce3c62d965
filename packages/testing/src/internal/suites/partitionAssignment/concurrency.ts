/**
 * `PartitionAssignmentStore` cases: concurrent reservations and a rolled-back transaction.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { asObject, type Case } from "./support.ts"

export const concurrentFillExactly: Case = {
  name: "50 concurrent reservations with capacity 7 fill partitions 0..6 exactly and put the rest on 7",
  run: () =>
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
}

export const concurrentSameOwner: Case = {
  name: "concurrent reservations by one owner agree on one partition, created once",
  run: () =>
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
}

export const rolledBackReservation: Case = {
  name: "a reservation inside a rolled-back transaction leaves nothing behind",
  requires: "transactional",
  run: () =>
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
}
