// Sequential partition assignment under real concurrency (R6.1).
import { assert, describe, it } from "@effect/vitest"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgPartitionAssignmentStore from "../src/PgPartitionAssignmentStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const Live = PgPartitionAssignmentStore.layer.pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(12)))

describe("PgPartitionAssignmentStore", () => {
  it.effect("50 concurrent creations with 7 per partition fill 7,7,7,7,7,7,7,1 with no gap", () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      const reservations = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => `user-${i}`),
        (ownerId) => store.reserve({ topic: "mailbox", ownerId, maxPerPartition: 7 }),
        { concurrency: "unbounded" }
      )
      assert.isTrue(reservations.every((r) => r.created))
      const counts = yield* store.counts("mailbox")
      assert.deepStrictEqual(
        [...counts.entries()],
        [
          [0, 7],
          [1, 7],
          [2, 7],
          [3, 7],
          [4, 7],
          [5, 7],
          [6, 7],
          [7, 1]
        ]
      )
      for (const r of reservations) {
        assert.deepStrictEqual(yield* store.lookup("mailbox", r.ownerId), Option.some(r.partition))
      }
    }).pipe(Effect.provide(Live))
  )

  it.effect("idempotent per owner, also when the same owner races itself; topics are independent", () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      const same = yield* Effect.forEach(
        Array.from({ length: 10 }),
        () => store.reserve({ topic: "a", ownerId: "u1", maxPerPartition: 2 }),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(same.filter((r) => r.created).length, 1)
      assert.isTrue(same.every((r) => r.partition === 0))
      const u2 = yield* store.reserve({ topic: "a", ownerId: "u2", maxPerPartition: 2 })
      const u3 = yield* store.reserve({ topic: "a", ownerId: "u3", maxPerPartition: 2 })
      assert.deepStrictEqual([u2.partition, u3.partition], [0, 1])
      assert.strictEqual((yield* store.reserve({ topic: "b", ownerId: "u3", maxPerPartition: 2 })).partition, 0)
      assert.isTrue(Option.isNone(yield* store.lookup("b", "u1")))
      assert.deepStrictEqual([...(yield* store.counts("nothing")).entries()], [])
    }).pipe(Effect.provide(Live))
  )

  it.effect("a hole left by a removed owner is filled before a new partition is opened; bad capacity is refused", () =>
    Effect.gen(function* () {
      const store = yield* PartitionAssignmentStore
      for (const u of ["a", "b", "c", "d"]) yield* store.reserve({ topic: "t", ownerId: u, maxPerPartition: 2 })
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      yield* sql.unsafe(`DELETE FROM ${t.partitionAssignment} WHERE owner_id = 'a'`)
      assert.strictEqual((yield* store.reserve({ topic: "t", ownerId: "e", maxPerPartition: 2 })).partition, 0)
      assert.strictEqual((yield* store.reserve({ topic: "t", ownerId: "f", maxPerPartition: 2 })).partition, 2)
      const bad = yield* Effect.flip(store.reserve({ topic: "t", ownerId: "g", maxPerPartition: 0 }))
      assert.strictEqual(bad.operation, "partitions.reserve")
      // REPEATABLE READ would read a snapshot older than the lock: refused, nothing written
      const repeatable = yield* Effect.flip(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
            return yield* store.reserve({ topic: "t", ownerId: "h", maxPerPartition: 2 })
          })
        )
      )
      assert.match(String(repeatable.message), /READ COMMITTED/)
      assert.isTrue(Option.isNone(yield* store.lookup("t", "h")))
    }).pipe(Effect.provide(Live))
  )
})
