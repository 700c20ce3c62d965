/**
 * `ConsumerSource` cases: several groups, and several members of one group.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { ConsumerBatch, Subscription } from "@effect-outbox/core/ConsumerSource"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { uniqueName } from "../../conformance.ts"
import { type Case, eventIdOf, publishTo, subscribe } from "./support.ts"

export const groupsAreIndependent: Case = {
  name: "consumer groups are independent: each gets every record",
  run: ({ makeTopic, recordsOf }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(1)
      const { requests } = yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
      const groupA = uniqueName("group-a")
      yield* Effect.scoped(
        Effect.gen(function* () {
          const subscription = yield* subscribe(groupA, [topic])
          const records = yield* recordsOf(subscription, 2)
          yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(records[1]!.offset) + 1n) }])
        })
      )
      const other = yield* Effect.scoped(
        Effect.flatMap(subscribe(uniqueName("group-b"), [topic]), (s) => recordsOf(s, 2))
      )
      assert.deepStrictEqual(
        other.map(eventIdOf),
        requests.map((r) => r.id)
      )
    })
}

export const twoMembersShareGroup: Case = {
  name: "two live members of one group together receive every record",
  requires: "groupMembers",
  run: ({ makeTopic, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(4)
      const group = uniqueName("group")
      const { requests } = yield* publishTo(
        topic,
        Array.from({ length: 16 }, (_, i) => ({ partition: i % 4 }))
      )
      const wanted = new Set(requests.map((r) => r.id as string))
      const seen = new Set<string>()
      yield* Effect.scoped(
        Effect.gen(function* () {
          const members = yield* Effect.all([subscribe(group, [topic]), subscribe(group, [topic])])
          const drain = (subscription: Subscription) =>
            subscription.batches.pipe(
              Stream.runForEach((batch) =>
                Effect.sync(() => {
                  for (const record of batch.records) seen.add(eventIdOf(record)!)
                })
              )
            )
          const fibers = yield* Effect.forEach(members, (m) => Effect.forkChild(drain(m)))
          yield* Effect.gen(function* () {
            while ([...wanted].some((id) => !seen.has(id))) yield* Effect.sleep("50 millis")
          }).pipe(Effect.timeout(receiveTimeout))
          yield* Effect.forEach(fibers, Fiber.interrupt)
        })
      )
      assert.isTrue([...wanted].every((id) => seen.has(id)))
    })
}

export const rebalancedBatchesNotCurrent: Case = {
  name: "batches of a partition a rebalance moved to another member are no longer current",
  requires: "groupMembers",
  run: ({ makeTopic, receiveTimeout }) =>
    Effect.gen(function* () {
      const topic = yield* makeTopic(2)
      const group = uniqueName("group")
      yield* publishTo(
        topic,
        Array.from({ length: 8 }, (_, i) => ({ partition: i % 2 }))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const collect = (subscription: Subscription, into: Array<ConsumerBatch>) =>
            Effect.forkChild(
              subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => into.push(batch))))
            )
          const waitUntil = (check: () => boolean) =>
            Effect.gen(function* () {
              while (!check()) yield* Effect.sleep("50 millis")
            }).pipe(Effect.timeout(receiveTimeout))
          // Member A alone owns both partitions; nothing is committed.
          const a = yield* subscribe(group, [topic])
          const ofA: Array<ConsumerBatch> = []
          yield* collect(a, ofA)
          yield* waitUntil(() => new Set(ofA.map((b) => b.partition)).size === 2)
          const early = [...ofA]
          assert.isTrue(early.every((batch) => a.isCurrent(batch)))
          // Member B joins: the rebalance gives it a partition, which restarts at offset 0.
          const b = yield* subscribe(group, [topic])
          const ofB: Array<ConsumerBatch> = []
          yield* collect(b, ofB)
          yield* waitUntil(() => ofB.length > 0)
          const moved = new Set(ofB.map((batch) => batch.partition))
          for (const batch of early) {
            if (moved.has(batch.partition)) assert.isFalse(a.isCurrent(batch), `partition ${batch.partition}`)
          }
          for (const batch of ofB) assert.isTrue(b.isCurrent(batch))
        })
      )
    })
}
