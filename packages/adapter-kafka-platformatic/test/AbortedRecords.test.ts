// The read_committed filter that replaces the client's: aborted transactions' records are dropped
// from a fetched partition even when one producer aborted twice in the response, or when the abort
// marker is not in it yet. Offsets and producer ids mirror what the broker sends.
import { assert, describe, it } from "@effect/vitest"
import { committedBatches } from "../src/internal/abortedRecords.ts"

const TRANSACTIONAL = 0x10
const CONTROL = 0x20

/** A control record's key: version int16 0, type int16 (0 abort, 1 commit). */
const markerKey = (type: 0 | 1) => Buffer.from([0, 0, 0, type])

const data = (offset: number, producerId: bigint, transactional = true) => ({
  firstOffset: BigInt(offset),
  lastOffsetDelta: 0,
  attributes: transactional ? TRANSACTIONAL : 0,
  producerId,
  records: [{ key: null, label: `data@${offset}` }]
})

const marker = (offset: number, producerId: bigint, type: 0 | 1) => ({
  firstOffset: BigInt(offset),
  lastOffsetDelta: 0,
  attributes: TRANSACTIONAL | CONTROL,
  producerId,
  records: [{ key: markerKey(type), label: `${type === 0 ? "abort" : "commit"}@${offset}` }]
})

const labels = (batches: ReadonlyArray<{ readonly records: ReadonlyArray<{ readonly label: string }> }>) =>
  batches.map((b) => b.records[0]!.label)

describe("committedBatches", () => {
  it("drops both aborted transactions of one producer, keeps its committed one and the markers", () => {
    const p = 7n
    const records = [
      data(0, p),
      marker(1, p, 0),
      data(2, p),
      marker(3, p, 1),
      data(4, p),
      marker(5, p, 0),
      data(6, 9n, false)
    ]
    const kept = committedBatches({
      abortedTransactions: [
        { producerId: p, firstOffset: 0n },
        { producerId: p, firstOffset: 4n }
      ],
      records
    })
    assert.deepStrictEqual(labels(kept), ["abort@1", "data@2", "commit@3", "abort@5", "data@6"])
  })

  it("an aborted transaction whose marker is beyond the response is dropped to the end; other producers stay", () => {
    const kept = committedBatches({
      abortedTransactions: [{ producerId: 1n, firstOffset: 1n }],
      records: [data(0, 2n), data(1, 1n), data(2, 2n), data(3, 1n)]
    })
    assert.deepStrictEqual(labels(kept), ["data@0", "data@2"])
  })

  it("without aborted transactions nothing is dropped", () => {
    const records = [data(0, 1n), marker(1, 1n, 1)]
    assert.deepStrictEqual(labels(committedBatches({ abortedTransactions: null, records })), ["data@0", "commit@1"])
  })
})
