/**
 * `PartitionAssignmentStore` cases: sequential `reserve`, `lookup` and `counts`.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { asObject, type Case } from "./support.ts"

export const firstOwnerGetsZero: Case = {
  name: "the first owner of a topic gets partition 0",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      const reservation = yield* store.reserve({ topic: "mail", ownerId: "user-1", maxPerPartition: 3 })
      assert.deepStrictEqual(reservation, { topic: "mail", ownerId: "user-1", partition: 0, created: true })
      assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 1 })
    })
}

export const fillsUpToCapacity: Case = {
  name: "owners fill partition 0 up to capacity, then the next partition",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      const partitions: Array<number> = []
      for (let i = 0; i < 7; i++) {
        partitions.push((yield* store.reserve({ topic: "mail", ownerId: `user-${i}`, maxPerPartition: 3 })).partition)
      }
      assert.deepStrictEqual(partitions, [0, 0, 0, 1, 1, 1, 2])
      assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 3, 1: 3, 2: 1 })
    })
}

export const reserveIdempotent: Case = {
  name: "reserve is idempotent per owner",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
      const first = yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
      const again = yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
      assert.deepStrictEqual(first, { topic: "mail", ownerId: "b", partition: 1, created: true })
      assert.deepStrictEqual(again, { topic: "mail", ownerId: "b", partition: 1, created: false })
      assert.deepStrictEqual(asObject(yield* store.counts("mail")), { 0: 1, 1: 1 })
    })
}

export const lookupOwner: Case = {
  name: "lookup finds an owner's partition and None for an unknown owner",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      assert.isTrue(Option.isNone(yield* store.lookup("mail", "nobody")))
      yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
      yield* store.reserve({ topic: "mail", ownerId: "b", maxPerPartition: 1 })
      assert.deepStrictEqual(yield* store.lookup("mail", "b"), Option.some(1))
      assert.isTrue(Option.isNone(yield* store.lookup("other-topic", "b")))
    })
}

export const topicsIndependent: Case = {
  name: "topics are independent",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      yield* store.reserve({ topic: "mail", ownerId: "a", maxPerPartition: 1 })
      const other = yield* store.reserve({ topic: "chat", ownerId: "a", maxPerPartition: 1 })
      assert.strictEqual(other.partition, 0)
      assert.isTrue(other.created)
      assert.deepStrictEqual(asObject(yield* store.counts("chat")), { 0: 1 })
      assert.deepStrictEqual(asObject(yield* store.counts("nothing-here")), {})
    })
}

export const higherCapacity: Case = {
  name: "a higher capacity lets the lowest partition with room take the next owner",
  run: () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      for (const owner of ["a", "b", "c"]) yield* store.reserve({ topic: "mail", ownerId: owner, maxPerPartition: 2 })
      const next = yield* store.reserve({ topic: "mail", ownerId: "d", maxPerPartition: 3 })
      assert.strictEqual(next.partition, 0)
      const after = yield* store.reserve({ topic: "mail", ownerId: "e", maxPerPartition: 3 })
      assert.strictEqual(after.partition, 1)
    })
}
