// The size rule the outbox enqueues and publishes by (core RecordSize), checked against the bytes
// kafkajs actually puts on the wire: the broker compares exactly these with max.message.bytes.

import { createRequire } from "node:module"
import { assert, describe, it } from "@effect/vitest"
import * as RecordSize from "@effect-outbox/core/RecordSize"

const require = createRequire(import.meta.url)
const Record = require("kafkajs/src/protocol/recordBatch/record/v0") as (record: object) => unknown
const { RecordBatch } = require("kafkajs/src/protocol/recordBatch/v0") as {
  RecordBatch: (batch: object) => Promise<{ size: () => number }>
}

/** The record batch kafkajs's produce request builds for these records (uncompressed). */
const encodedBatchBytes = async (records: ReadonlyArray<RecordSize.SizedRecord>) => {
  const encoded = records.map((r, i) =>
    Record({
      offsetDelta: i,
      timestampDelta: 0,
      key: r.key === null ? null : Buffer.from(r.key),
      value: Buffer.from(r.payload),
      headers: r.headers
    })
  )
  const batch = await RecordBatch({ records: encoded, lastOffsetDelta: records.length - 1 })
  return batch.size()
}

const record = (payload: number, key: string | null = "user-42", headers: Record<string, string> = {}) => ({
  key,
  headers: { "event-id": "0193a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", ...headers },
  payload: new Uint8Array(payload)
})

describe("RecordSize", () => {
  it("a record alone: the estimate is kafkajs's encoded batch size, plus 2 bytes of timestamp slack", async () => {
    const cases = [
      record(0, null, {}),
      record(10),
      record(127),
      record(128),
      record(20_000, "ключ-ü", { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
      record(1_000_000, "k", { tenant: "acme", "🙂": "é" })
    ]
    for (const r of cases) {
      assert.strictEqual(RecordSize.singleRecordBatchBytes(r), (await encodedBatchBytes([r])) + 2)
    }
  })

  it("every batch splitByBatchBytes makes encodes within the limit, in order, none empty", async () => {
    const records = Array.from({ length: 60 }, (_, i) => record(1_000 + 997 * (i % 13)))
    const limit = 20_000
    const runs = RecordSize.splitByBatchBytes(records, limit)
    assert.deepStrictEqual(runs.flat(), records)
    assert.isAbove(runs.length, 1)
    for (const run of runs) {
      assert.isAbove(run.length, 0)
      assert.isAtMost(await encodedBatchBytes(run), limit)
    }
  })

  it("batchBytes of several records is at least kafkajs's encoded batch, and over it by at most 2 bytes per record", async () => {
    const records = Array.from({ length: 40 }, (_, i) => record(100 + 301 * (i % 7), i % 3 === 0 ? null : `user-${i}`))
    for (const n of [1, 2, 17, 40]) {
      const run = records.slice(0, n)
      const encoded = await encodedBatchBytes(run)
      assert.isAtLeast(RecordSize.batchBytes(run), encoded)
      assert.isAtMost(RecordSize.batchBytes(run), encoded + 2 * n)
    }
    assert.strictEqual(RecordSize.batchBytes([records[5]!]), RecordSize.singleRecordBatchBytes(records[5]!))
  })

  it("a record too large for any batch gets a batch of its own; its neighbours are still packed", () => {
    const runs = RecordSize.splitByBatchBytes([record(10), record(10), record(50_000), record(10)], 20_000)
    assert.deepStrictEqual(
      runs.map((run) => run.map((r) => r.payload.byteLength)),
      [[10, 10], [50_000], [10]]
    )
  })

  it("the default limit is Kafka's default max.message.bytes", () => {
    assert.strictEqual(RecordSize.DEFAULT_MAX_MESSAGE_BYTES, 1_048_588)
  })
})
