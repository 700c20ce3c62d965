/**
 * `TransactionalProducer` fencing by the group: offsets sent with the membership of a member
 * that left the group abort the whole transaction, so a revoked member never commits beside the
 * partition's new owner. A producer that cannot send the group's metadata says so.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { type ConsumerBatch, ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { publishRequest, uniqueName } from "../../conformance.ts"
import { assertCommitted, bytes, type Case } from "./support.ts"

/** The first batch a new member of `groupId` gets, and that member's subscription. */
const firstBatch = (groupId: string, topic: string, scope: Scope.Scope) =>
  Effect.gen(function* () {
    const source = yield* ConsumerSource
    const subscription = yield* source
      .subscribe({ groupId, topics: [topic], fromBeginning: true })
      .pipe(Scope.provide(scope))
    const batch = yield* Stream.runHead(subscription.batches).pipe(
      Effect.timeoutOrElse({ duration: "60 seconds", orElse: () => Effect.die(`no batch of ${topic} for ${groupId}`) })
    )
    return { subscription, batch: Option.getOrThrow(batch) as ConsumerBatch }
  })

export const staleMembershipAborts: Case = {
  name: "offsets sent with the membership of a member that left the group abort the transaction, nothing of it visible",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      if (producer.fencing._tag === "Unsupported") {
        // The pipeline refuses such a producer; the reason is what it tells the user.
        assert.isAbove(producer.fencing.reason.length, 20)
        return
      }
      const input = yield* topics.makeTopic(1)
      const output = yield* topics.makeTopic(1)
      const groupId = uniqueName("tx-fenced")
      yield* producer.commit({ groupId, records: [yield* publishRequest(input, { partition: 0 })], offsets: [] })
      // Member A reads the record, then leaves; member B takes the partition.
      const scopeA = yield* Scope.make()
      const a = yield* firstBatch(groupId, input, scopeA)
      const group = a.subscription.groupMetadata?.(a.batch)
      assert.isDefined(group, "the source reports the membership a batch was fetched under")
      yield* Scope.close(scopeA, Exit.void)
      const b = yield* firstBatch(groupId, input, yield* Effect.scope)
      assert.isDefined(b.subscription.groupMetadata?.(b.batch))

      const error = yield* Effect.flip(
        producer.commit({
          groupId,
          records: [{ ...(yield* publishRequest(output, { partition: 0 })), payload: bytes("zombie output") }],
          offsets: [{ topic: input, partition: 0, offset: "1" }],
          group: group!
        })
      )
      assert.strictEqual(error._tag, "TransactionAbortedError")
      assert.isTrue(error.groupFenced, `the group refused the offsets: ${error.reason}`)
      yield* assertCommitted(groupId, input, {})
      assert.deepStrictEqual(yield* Stream.runCollect((yield* TopicReader).read(output)), [])
      // The new owner's transaction with its own membership commits.
      yield* producer.commit({
        groupId,
        records: [],
        offsets: [{ topic: input, partition: 0, offset: "1" }],
        group: b.subscription.groupMetadata!(b.batch)!
      })
      yield* assertCommitted(groupId, input, { 0: "1" })
    })
}
