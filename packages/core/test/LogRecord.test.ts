import { assert, describe, it } from "@effect/vitest"
import * as LogRecord from "../src/LogRecord.ts"
import type { EventId } from "../src/OutboxMessage.ts"

const message = (n: number, overrides: Partial<LogRecord.LogMessage> = {}): LogRecord.LogMessage => ({
  id: `0190a0a0-0000-7000-8000-${String(n).padStart(12, "0")}` as EventId,
  topic: "orders",
  key: `user-${n}`,
  partition: n % 3 === 0 ? null : n % 3,
  headers: { "event-id": `e-${n}`, traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
  payload: new Uint8Array(1024).map((_, i) => (i * 7 + n) % 256),
  createdAt: 1_733_000_000_000 + n,
  ...overrides
})

const roundTrip = (m: LogRecord.LogMessage) => {
  const decoded = LogRecord.decode(LogRecord.encode(m))
  if (decoded instanceof LogRecord.LogRecordError) throw decoded
  return decoded
}

const asPlain = (m: LogRecord.LogMessage) => ({ ...m, payload: [...m.payload] })

describe("LogRecord, one event's bytes in the log", () => {
  it("decodes what it encoded: id, topic, key, partition, headers, createdAt and the payload's bytes", () => {
    for (const m of [message(1), message(3), message(2, { key: null, headers: {} })]) {
      assert.deepStrictEqual(asPlain(roundTrip(m)), asPlain(m))
    }
  })

  it("keeps metadata that is not ASCII, longer than its first scratch buffer, and past the size it keeps", () => {
    const wide = message(4, { key: "ключ-😀-鍵", headers: { note: "é".repeat(3_000), "event-id": "😀" } })
    assert.deepStrictEqual(asPlain(roundTrip(wide)), asPlain(wide))
    // and the next, short one is not disturbed by the grown buffer
    assert.deepStrictEqual(asPlain(roundTrip(message(5))), asPlain(message(5)))
    // 100,000 characters of headers: encoded into an array of its own, not the kept buffer
    const huge = message(6, { headers: { note: "鍵".repeat(100_000), "event-id": "e-6" } })
    assert.deepStrictEqual(asPlain(roundTrip(huge)), asPlain(huge))
    assert.deepStrictEqual(asPlain(roundTrip(message(7))), asPlain(message(7)))
  })

  it("gives every encoding bytes of its own, across shared blocks, and a large payload its own array", () => {
    // 200 events of ~1.3 KB span several 64 KiB blocks; all encoded first, then all decoded.
    const messages = Array.from({ length: 200 }, (_, n) => message(n))
    const encoded = messages.map(LogRecord.encode)
    encoded[0]!.fill(0) // overwriting one encoding leaves every other one intact
    encoded.slice(1).forEach((bytes, i) => {
      assert.deepStrictEqual(asPlain(LogRecord.decode(bytes) as LogRecord.LogMessage), asPlain(messages[i + 1]!))
    })
    const large = message(7, { payload: new Uint8Array(40_000).fill(9) })
    assert.deepStrictEqual(asPlain(roundTrip(large)), asPlain(large))
  })

  it("decodes the payload as a copy: the source bytes may be reused afterwards", () => {
    const bytes = LogRecord.encode(message(6))
    const decoded = LogRecord.decode(bytes) as LogRecord.LogMessage
    bytes.fill(0)
    assert.deepStrictEqual([...decoded.payload], [...message(6).payload])
  })

  it("refuses bytes that are not an event of this library with a LogRecordError that says why", () => {
    const good = LogRecord.encode(message(8))
    const reasonOf = (bytes: Uint8Array) => {
      const result = LogRecord.decode(bytes)
      assert.instanceOf(result, LogRecord.LogRecordError)
      return (result as LogRecord.LogRecordError).message
    }
    assert.include(reasonOf(new Uint8Array([1, 0, 0])), "shorter than the header")
    const wrongVersion = good.slice()
    wrongVersion[0] = 2
    assert.include(reasonOf(wrongVersion), "version 2")
    assert.include(reasonOf(good.slice(0, 20)), "runs past the end")
    const notJson = new Uint8Array([1, 0, 0, 0, 3, 0x7b, 0x7b, 0x7b])
    assert.include(reasonOf(notJson), "not JSON")
    const meta = new TextEncoder().encode(JSON.stringify({ topic: "orders" }))
    const lacking = new Uint8Array([1, 0, 0, 0, meta.byteLength, ...meta])
    assert.include(reasonOf(lacking), "lacks id")
  })

  it("validate passes what Outbox.enqueue writes and names what it would have refused", () => {
    assert.isUndefined(LogRecord.validate(message(1)))
    assert.isUndefined(LogRecord.validate(message(3, { key: null, headers: {} })))
    const bad = (overrides: Record<string, unknown>) =>
      LogRecord.validate({ ...message(1), ...overrides } as unknown as LogRecord.LogMessage)
    assert.include(bad({ id: "e1" }), "is not a UUID")
    assert.include(bad({ topic: "" }), "not a legal Kafka topic name")
    assert.include(bad({ topic: "a b" }), "not a legal Kafka topic name")
    assert.include(bad({ topic: ".." }), "not a legal Kafka topic name")
    assert.include(bad({ key: 42 }), "key is a number")
    assert.include(bad({ partition: -1 }), "not an integer >= 0")
    assert.include(bad({ partition: 2.5 }), "not an integer >= 0")
    assert.include(bad({ partition: 1024 }), "above the maximum 1023")
    assert.isUndefined(LogRecord.validate(message(1, { partition: 1024 }), 2047), "the maximum is a setting")
    assert.include(bad({ headers: { a: 1 } }), 'header "a" is a number')
    assert.include(bad({ headers: null }), "headers are not an object")
    assert.include(bad({ createdAt: "x" }), "createdAt is not a number")
  })
})
