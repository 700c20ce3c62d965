/**
 * `ConsumerSource` cases: commits, where a group resumes, and the offsets `BrokerAdmin` reports.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Effect from "effect/Effect"
import { uniqueName } from "../../conformance.ts"
import { type Case, publishTo, subscribe } from "./support.ts"

export const resumesAtCommittedOffset: Case = {
  name: "after a commit, the group's next subscription resumes at the committed offset",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const group = uniqueName("group")
      const { receipts } = yield* publishTo(
        topic,
        Array.from({ length: 6 }, () => ({ partition: 0 }))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(group, [topic])
          const records = yield* recordsOf(subscription, 6)
          assert.strictEqual(records.length, 6)
          // Processed the first four: commit the next offset to read.
          yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(records[3]!.offset) + 1n) }])
        })
      )
      const resumed = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 2)))
      assert.deepStrictEqual(
        resumed.map((r) => r.offset),
        [receipts[4]!.offset, receipts[5]!.offset]
      )
    })
}

export const redeliversWithoutCommit: Case = {
  name: "without a commit, the group's next subscription redelivers from the last committed offset",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const group = uniqueName("group")
      const { receipts } = yield* publishTo(
        topic,
        Array.from({ length: 4 }, () => ({ partition: 0 }))
      )
      const offsets = receipts.map((r) => r.offset)
      // A member that crashes before committing anything.
      const first = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 4)))
      assert.deepStrictEqual(
        first.map((r) => r.offset),
        offsets
      )
      // Every record comes again; this member commits after the first one, then crashes.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(group, [topic])
          const again = yield* recordsOf(subscription, 4)
          assert.deepStrictEqual(
            again.map((r) => r.offset),
            offsets
          )
          yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(offsets[0]!) + 1n) }])
        })
      )
      const third = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 3)))
      assert.deepStrictEqual(
        third.map((r) => r.offset),
        offsets.slice(1)
      )
    })
}

export const commitCoversPartitions: Case = {
  name: "one commit covers several partitions; each resumes at its own offset",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(2)
      const group = uniqueName("group")
      const { receipts } = yield* publishTo(
        topic,
        [0, 0, 0, 1, 1, 1].map((partition) => ({ partition }))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(group, [topic])
          yield* recordsOf(subscription, 6)
          yield* subscription.commit([
            { topic, partition: 0, offset: String(BigInt(receipts[1]!.offset) + 1n) },
            { topic, partition: 1, offset: String(BigInt(receipts[3]!.offset) + 1n) }
          ])
        })
      )
      const resumed = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 3)))
      const byPartition = (p: number) => resumed.filter((r) => r.partition === p).map((r) => r.offset)
      assert.deepStrictEqual(byPartition(0), [receipts[2]!.offset])
      assert.deepStrictEqual(byPartition(1), [receipts[4]!.offset, receipts[5]!.offset])
    })
}

export const groupOffsetsFollowCommits: Case = {
  name: "BrokerAdmin.groupOffsets: the group's committed offset and the log's end per partition, so lag follows commits",
  run: ({ makeTopic, recordsOf, prefix }) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = yield* makeTopic(2)
      const group = uniqueName("group")
      const { receipts } = yield* publishTo(
        topic,
        [0, 0, 0, 0, 0, 1, 1, 1].map((partition) => ({ partition }))
      )
      const offsetsOf = Effect.map(admin.groupOffsets({ groupId: group, topics: [topic] }), (rows) =>
        rows.map((row) => ({ ...row, records: Number(BigInt(row.end) - BigInt(row.start)) }))
      )
      const lags = (fromBeginning: boolean) =>
        Effect.map(offsetsOf, (rows) => rows.map((row) => Telemetry.lagOf(row, { fromBeginning })))

      // A group that never committed: no committed offset; it lags by the whole log when it
      // reads from the beginning, by nothing when it starts at the end.
      const before = yield* offsetsOf
      assert.deepStrictEqual(
        before.map((row) => [row.topic, row.partition, row.committed, row.records]),
        [
          [topic, 0, null, 5],
          [topic, 1, null, 3]
        ]
      )
      assert.strictEqual(before[0]!.end, String(BigInt(receipts[4]!.offset) + 1n))
      assert.deepStrictEqual(yield* lags(true), [5, 3])
      assert.deepStrictEqual(yield* lags(false), [0, 0])

      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(group, [topic])
          yield* recordsOf(subscription, 8)
          // Delivered is not done: nothing committed, nothing less behind.
          assert.deepStrictEqual(yield* lags(true), [5, 3])
          // Two records of partition 0 finished.
          const next = String(BigInt(receipts[1]!.offset) + 1n)
          yield* subscription.commit([{ topic, partition: 0, offset: next }])
          const partly = yield* offsetsOf
          assert.strictEqual(partly[0]!.committed, next)
          assert.strictEqual(partly[1]!.committed, null)
          assert.deepStrictEqual(yield* lags(true), [3, 3])
          // The log grows while the member holds the rest: the lag grows with it.
          yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
          assert.deepStrictEqual(yield* lags(true), [5, 3])
        })
      )
      // The next member finishes everything.
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(group, [topic])
          const records = yield* recordsOf(subscription, 8)
          const last = (p: number) => records.filter((r) => r.partition === p).at(-1)!
          yield* subscription.commit(
            [0, 1].map((partition) => ({ topic, partition, offset: String(BigInt(last(partition).offset) + 1n) }))
          )
        })
      )
      assert.deepStrictEqual(yield* lags(true), [0, 0])
      assert.deepStrictEqual(yield* lags(false), [0, 0])
      // A topic that does not exist is left out, the others still answer.
      const missing = uniqueName(`${prefix}-missing`)
      const rows = yield* admin.groupOffsets({ groupId: group, topics: [missing, topic] })
      assert.deepStrictEqual(
        rows.map((row) => [row.topic, row.partition]),
        [
          [topic, 0],
          [topic, 1]
        ]
      )
    })
}
