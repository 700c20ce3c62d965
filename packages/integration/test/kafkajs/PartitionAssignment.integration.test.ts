// Sequential partition assignment end to end (R6): the assignment store reserves, the real
// broker grows, and each user's records land on the user's partition with the user's key.

import { assert, layer } from "@effect/vitest"
import * as PgPartitionAssignmentStore from "@effect-outbox/adapter-pg/PgPartitionAssignmentStore"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as PartitionAssignment from "@effect-outbox/core/PartitionAssignment"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { freshTables, pgClient } from "../pg.ts"
import { freshTopic, KafkaTest, request, text } from "./support.ts"

const Assignment = PartitionAssignment.layer({ maxPerPartition: 3 }).pipe(
  Layer.provideMerge(Layer.merge(InMemoryDatabase.layer, KafkaTest))
)

layer(Assignment, { timeout: "120 seconds", excludeTestServices: true })("PartitionAssignment on Kafka", (it) => {
  it.effect("users beyond a partition's capacity open new partitions on the broker; their records follow them", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1, "mailbox")
      const users = Array.from({ length: 12 }, (_, i) => 1000 + i)
      // 12 users, 3 per partition: partitions 0..3, three of them new. Created concurrently.
      const assignments = yield* Effect.forEach(users, (userId) => PartitionAssignment.assign(topic, String(userId)), {
        concurrency: 4
      })
      const admin = yield* BrokerAdmin
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(4))
      const perPartition = new Map<number, number>()
      for (const a of assignments) perPartition.set(a.partition, (perPartition.get(a.partition) ?? 0) + 1)
      assert.deepStrictEqual([...perPartition.entries()].sort(), [
        [0, 3],
        [1, 3],
        [2, 3],
        [3, 3]
      ])
      assert.isTrue(assignments.every((a) => a.created && a.key === a.ownerId))

      // Assigning again is idempotent: same partition, nothing created, no growth.
      const again = yield* PartitionAssignment.assign(topic, "1005")
      assert.strictEqual(again.partition, assignments[5]!.partition)
      assert.isFalse(again.created)
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(4))

      // Each user's events carry key = String(userId) and the assigned partition.
      const requests = yield* Effect.forEach(
        assignments.flatMap((a) => [a, a]),
        (a, i) => request(topic, { key: a.key, partition: a.partition, payload: `${a.ownerId}#${i % 2}` })
      )
      const outcomes = yield* (yield* Publisher).publish(requests)
      assert.isTrue(outcomes.every(Result.isSuccess))
      const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
      assert.strictEqual(records.length, users.length * 2)
      const byOwner = new Map(assignments.map((a) => [a.ownerId, a.partition]))
      for (const record of records) {
        assert.strictEqual(record.partition, byOwner.get(record.key!), `user ${record.key} on its partition`)
        assert.isTrue(text(record.value).startsWith(`${record.key}#`))
      }
      // Per user, the two events are in order on the partition.
      for (const owner of byOwner.keys()) {
        const mine = records.filter((r) => r.key === owner).sort((a, b) => Number(BigInt(a.offset) - BigInt(b.offset)))
        assert.deepStrictEqual(
          mine.map((r) => text(r.value)),
          [`${owner}#0`, `${owner}#1`]
        )
      }
    })
  )

  it.effect("a mapping ahead of the broker (crash between reserve and grow) is caught up by the next assign", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1, "mailbox")
      for (let u = 0; u < 3; u++) yield* PartitionAssignment.assign(topic, `u${u}`)
      const admin = yield* BrokerAdmin
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(1))
      // The store reserved partition 1 for u3, then the process died before growing the topic.
      const store = yield* PartitionAssignmentStore
      const reserved = yield* store.reserve({ topic, ownerId: "u3", maxPerPartition: 3 })
      assert.strictEqual(reserved.partition, 1)
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(1))
      // Assigning again (twice at once, even) finds the reservation and grows the broker.
      const [a, b] = yield* Effect.all(
        [PartitionAssignment.assign(topic, "u3"), PartitionAssignment.assign(topic, "u3")],
        {
          concurrency: 2
        }
      )
      assert.deepStrictEqual([a.partition, b.partition, a.created, b.created], [1, 1, false, false])
      assert.deepStrictEqual(yield* admin.partitionCount(topic), Option.some(2))
    })
  )
})

// The same with the PostgreSQL store: concurrent reservations serialised by the database.
const PgAssignment = PartitionAssignment.layer({ maxPerPartition: 4 }).pipe(
  Layer.provideMerge(
    Layer.merge(
      PgPartitionAssignmentStore.layer.pipe(Layer.provide(freshTables()), Layer.provide(pgClient(4))),
      KafkaTest
    )
  )
)

layer(PgAssignment, { timeout: "120 seconds", excludeTestServices: true })(
  "PartitionAssignment on PostgreSQL + Kafka",
  (it) => {
    it.effect(
      "16 users created concurrently fill partitions 0..3; the broker grows to 4 and records follow the users",
      () =>
        Effect.gen(function* () {
          const topic = yield* freshTopic(1, "mailbox-pg")
          const assignments = yield* Effect.forEach(
            Array.from({ length: 16 }, (_, i) => `user-${i}`),
            (u) => PartitionAssignment.assign(topic, u),
            { concurrency: 8 }
          )
          const perPartition = new Map<number, number>()
          for (const a of assignments) perPartition.set(a.partition, (perPartition.get(a.partition) ?? 0) + 1)
          assert.deepStrictEqual([...perPartition.entries()].sort(), [
            [0, 4],
            [1, 4],
            [2, 4],
            [3, 4]
          ])
          assert.deepStrictEqual(yield* (yield* BrokerAdmin).partitionCount(topic), Option.some(4))
          const requests = yield* Effect.forEach(assignments, (a) =>
            request(topic, { key: a.key, partition: a.partition })
          )
          assert.isTrue((yield* (yield* Publisher).publish(requests)).every(Result.isSuccess))
          const records = yield* (yield* TopicReader).read(topic).pipe(Stream.runCollect)
          const byOwner = new Map(assignments.map((a) => [a.ownerId, a.partition]))
          assert.strictEqual(records.length, 16)
          for (const record of records) assert.strictEqual(record.partition, byOwner.get(record.key!))
        })
    )
  }
)
