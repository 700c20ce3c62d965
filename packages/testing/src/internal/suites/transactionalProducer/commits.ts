/**
 * `TransactionalProducer` cases: a committed transaction's records are visible where its
 * receipts say, together with its group's offsets; transactions follow one another.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import { uniqueName } from "../../conformance.ts"
import { assertCommitted, type Case, committed, payloads, record, visible } from "./support.ts"

export const commitsRecordsAndOffsets: Case = {
  name: "a committed transaction's records are visible where its receipts say, with the group's offsets",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const output = yield* topics.makeTopic(2)
      const other = yield* topics.makeTopic(1)
      const input = yield* topics.makeTopic(2)
      const groupId = uniqueName("tx-group")
      const records = [
        yield* record(output, "a", 0),
        yield* record(output, "b", 1),
        yield* record(other, "c", null, "key-c"),
        yield* record(output, "d", 0)
      ]
      const receipts = yield* producer.commit({
        groupId,
        records,
        offsets: [
          { topic: input, partition: 0, offset: "7" },
          { topic: input, partition: 1, offset: "3" }
        ]
      })
      assert.deepStrictEqual(
        receipts.map((r) => [r.topic, r.partition]),
        [
          [output, 0],
          [output, 1],
          [other, 0],
          [output, 0]
        ]
      )
      assert.isTrue(BigInt(receipts[0]!.offset) < BigInt(receipts[3]!.offset), "one partition's receipts in order")
      const read = [...(yield* visible(output, 3)), ...(yield* visible(other, 1))]
      records.forEach((request, i) => {
        const receipt = receipts[i]!
        const found = read.find(
          (r) => r.topic === receipt.topic && r.partition === receipt.partition && r.offset === receipt.offset
        )
        assert.isDefined(found, `nothing at ${receipt.topic}/${receipt.partition}/${receipt.offset}`)
        assert.strictEqual(found!.headers["event-id"], request.id)
        assert.strictEqual(found!.key, request.key)
      })
      yield* assertCommitted(groupId, input, { 0: "7", 1: "3" })
    })
}

export const successiveTransactions: Case = {
  name: "successive transactions append after one another and move the group's offsets forward",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const output = yield* topics.makeTopic(1)
      const input = yield* topics.makeTopic(1)
      const groupId = uniqueName("tx-group")
      const offsets = []
      for (let i = 1; i <= 3; i++) {
        const [receipt] = yield* producer.commit({
          groupId,
          records: [yield* record(output, `r${i}`)],
          offsets: [{ topic: input, partition: 0, offset: String(i) }]
        })
        offsets.push(BigInt(receipt!.offset))
      }
      assert.isTrue(offsets[0]! < offsets[1]! && offsets[1]! < offsets[2]!, `offsets ${offsets.join(",")}`)
      assert.deepStrictEqual(yield* payloads(output, 3), ["r1", "r2", "r3"])
      yield* assertCommitted(groupId, input, { 0: "3" })
    })
}

export const offsetsAlone: Case = {
  name: "a transaction of offsets alone commits them; an empty one changes nothing",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const input = yield* topics.makeTopic(1)
      const groupId = uniqueName("tx-group")
      assert.deepStrictEqual(yield* producer.commit({ groupId, records: [], offsets: [] }), [])
      assert.deepStrictEqual(yield* committed(groupId, input), {})
      const receipts = yield* producer.commit({
        groupId,
        records: [],
        offsets: [{ topic: input, partition: 0, offset: "4" }]
      })
      assert.deepStrictEqual(receipts, [])
      yield* assertCommitted(groupId, input, { 0: "4" })
    })
}
