// The log source's decoding of pgoutput inserts, one malformed shape per case: whoever holds
// INSERT on the event table can write any bytes, so each shape must come out as an entry flagged
// `invalid` (never a failed read, never a thrown error) and a well-formed row as the event itself.
import { assert, describe, it } from "@effect/vitest"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import { type EventId, isEventId } from "@effect-outbox/core/OutboxMessage"
import * as Bytes from "../src/internal/logBytes.ts"
import * as Pgoutput from "../src/internal/pgoutput.ts"

const ID = "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b" as EventId
const TABLE = "outbox_log_event"

const u32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]
const u16 = (n: number) => [(n >>> 8) & 0xff, n & 0xff]
const cstring = (s: string) => [...new TextEncoder().encode(s), 0]
const uuidBytes = (id: string) => [...Buffer.from(id.replaceAll("-", ""), "hex")]

/** 'R' for relation 42 with the given columns. */
const relation = (name: string, columns: ReadonlyArray<string>) =>
  Uint8Array.from([
    0x52,
    ...u32(42),
    ...cstring("outbox"),
    ...cstring(name),
    0x64,
    ...u16(columns.length),
    ...columns.flatMap((c) => [1, ...cstring(c), ...u32(2950), ...u32(0xffffffff)])
  ])

type Column = readonly ["b" | "t", ReadonlyArray<number> | Uint8Array] | "n"

/** 'I' for relation 42. */
const insert = (columns: ReadonlyArray<Column>) =>
  Uint8Array.from([
    0x49,
    ...u32(42),
    0x4e,
    ...u16(columns.length),
    ...columns.flatMap((c) => (c === "n" ? [0x6e] : [c[0].charCodeAt(0), ...u32(c[1].length), ...c[1]]))
  ])

const message = (overrides: Partial<LogRecord.LogMessage> = {}): LogRecord.LogMessage => ({
  id: ID,
  topic: "orders",
  key: "k1",
  partition: 2,
  headers: { "event-id": ID },
  payload: Uint8Array.from([1, 2, 3]),
  createdAt: 1_733_000_000_000,
  ...overrides
})

/** A record with arbitrary metadata (what a hand-written INSERT could hold). */
const record = (meta: unknown, payload: ReadonlyArray<number> = [9]) => {
  const json = [...new TextEncoder().encode(typeof meta === "string" ? meta : JSON.stringify(meta))]
  return [1, ...u32(json.length), ...json, ...payload]
}

const decode = (row: Uint8Array, described = true) => {
  const decoder = Pgoutput.makeDecoder(TABLE)
  if (described) Pgoutput.change(decoder, relation(TABLE, ["id", "record"]), () => "0/16B3748", 0)
  const entry = Pgoutput.change(decoder, row, () => "0/16B3748", 1)
  if (entry === undefined) throw new Error("no entry")
  return entry
}

const rowOf = (bytes: ReadonlyArray<number> | Uint8Array, id = ID) =>
  insert([
    ["b", uuidBytes(id)],
    ["b", bytes]
  ])

const invalid = (row: Uint8Array, reason: RegExp) => {
  const entry = decode(row)
  assert.match(entry.invalid ?? "", reason)
  return entry
}

describe("pgoutput decoding of the event table's inserts", () => {
  it("a well-formed row is the event, not flagged", () => {
    const m = message()
    const entry = decode(rowOf(LogRecord.encode(m)))
    assert.isUndefined(entry.invalid)
    assert.deepStrictEqual({ ...entry, payload: [...entry.payload] }, { ...m, payload: [1, 2, 3] })
  })

  it("a row in text form (a server that ignores binary) is the event too", () => {
    const m = message()
    const hex = `\\x${Buffer.from(LogRecord.encode(m)).toString("hex")}`
    const entry = decode(
      insert([
        ["t", new TextEncoder().encode(ID)],
        ["t", new TextEncoder().encode(hex)]
      ])
    )
    assert.isUndefined(entry.invalid)
    assert.strictEqual(entry.topic, "orders")
  })

  it("without a relation message, the columns are read as (id, record)", () => {
    assert.isUndefined(decode(rowOf(LogRecord.encode(message())), false).invalid)
  })

  it("a record shorter than its header: flagged, the raw bytes as payload, the row's id kept", () => {
    const entry = invalid(rowOf([1, 0]), /shorter than the header/)
    assert.strictEqual(entry.id, ID)
    assert.deepStrictEqual([...entry.payload], [1, 0])
  })

  it("an unknown version", () => {
    invalid(rowOf([2, 0, 0, 0, 0]), /version 2/)
  })

  it("a metadata length past the end", () => {
    invalid(rowOf([1, ...u32(1000), 0x7b]), /runs past the end/)
  })

  it("metadata that is not JSON", () => {
    invalid(rowOf(record("{not json")), /not JSON/)
  })

  it("metadata without a topic", () => {
    invalid(rowOf(record({ id: ID, createdAt: 1 })), /lacks id, topic or createdAt/)
  })

  it("an illegal topic name", () => {
    const entry = invalid(rowOf(record({ ...message({ topic: "no such/topic" }), payload: undefined })), /topic/)
    assert.strictEqual(entry.topic, "no such/topic")
  })

  it("a partition above the maximum, negative, or not an integer", () => {
    invalid(rowOf(record({ ...message({ partition: 5000 }), payload: undefined })), /above the maximum/)
    invalid(rowOf(record({ ...message({ partition: -1 }), payload: undefined })), /not an integer >= 0/)
    invalid(rowOf(record({ ...message({ partition: 1.5 }), payload: undefined })), /not an integer >= 0/)
    invalid(rowOf(record({ ...message(), partition: "1", payload: undefined })), /not an integer >= 0/)
  })

  it("a key that is not a string", () => {
    invalid(rowOf(record({ ...message(), key: 42, payload: undefined })), /key is a number/)
  })

  it("a header value that is not a string, or headers that are not an object", () => {
    invalid(rowOf(record({ ...message(), headers: { n: 1 }, payload: undefined })), /header "n" is a number/)
    invalid(rowOf(record({ ...message(), headers: ["x"], payload: undefined })), /headers are not an object/)
  })

  it("a record whose id is not the row's", () => {
    const other = "0193a0b1-c2d3-7e4f-8a5b-000000000000"
    invalid(rowOf(record({ ...message({ id: other as EventId }), payload: undefined })), /is not the row's id/)
  })

  it("a record id that differs from the row's in one character, or only in case, is not the row's id", () => {
    const row = "0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1b" as EventId
    for (const other of ["0193a0b1-c2d3-7e4f-8a5b-6c7d8e9f0a1c", "0193A0B1-C2D3-7E4F-8A5B-6C7D8E9F0A1B", `${row}0`]) {
      invalid(rowOf(record({ ...message({ id: other as EventId }), payload: undefined }), row), /is not the row's id/)
    }
  })

  it("the id comparison without building the text agrees with the text, byte for byte", () => {
    const bytes = new Uint8Array(20)
    for (let n = 0; n < 500; n++) {
      for (let i = 0; i < bytes.length; i++) bytes[i] = (n * 37 + i * 101 + ((n * i) % 13)) & 0xff
      const text = Bytes.uuidText(bytes.subarray(2, 18))
      assert.isTrue(Bytes.isUuidTextOf(text, bytes, 2))
      const at = n % 36
      const changed = `${text.slice(0, at)}${text[at] === "0" ? "1" : "0"}${text.slice(at + 1)}`
      assert.isFalse(Bytes.isUuidTextOf(changed, bytes, 2), changed)
      assert.isFalse(Bytes.isUuidTextOf(text.toUpperCase() === text ? `${text}x` : text.toUpperCase(), bytes, 2))
    }
  })

  it("a record id that is not a UUID", () => {
    const entry = decode(
      insert([
        ["t", new TextEncoder().encode("not-a-uuid")],
        ["b", record({ ...message({ id: "not-a-uuid" as EventId }), payload: undefined })]
      ])
    )
    assert.match(entry.invalid ?? "", /is not a UUID/)
  })

  it("a truncated insert message: flagged with a stand-in id from its position", () => {
    const full = rowOf(LogRecord.encode(message()))
    const entry = decode(full.subarray(0, 20))
    assert.match(entry.invalid ?? "", /undecodable insert/)
    assert.isTrue(isEventId(entry.id), `${entry.id} passes the event id check`)
    assert.strictEqual(entry.createdAt, 0)
    assert.strictEqual(decode(full.subarray(0, 20)).id, entry.id, "the same entry gets the same stand-in id")
  })

  it("a null record", () => {
    invalid(insert([["b", uuidBytes(ID)], "n"]), /no record/)
  })

  it("a row of another table (a publication someone widened)", () => {
    const decoder = Pgoutput.makeDecoder(TABLE)
    Pgoutput.change(decoder, relation("accounts", ["id", "record"]), () => "0/1", 0)
    const entry = Pgoutput.change(decoder, rowOf(LogRecord.encode(message())), () => "0/1", 1)
    assert.match(entry?.invalid ?? "", /a row of accounts, not of the event table/)
  })

  it("begin, commit and relation messages carry no entry", () => {
    const decoder = Pgoutput.makeDecoder(TABLE)
    assert.isUndefined(Pgoutput.change(decoder, relation(TABLE, ["id", "record"]), () => "0/1", 0))
    assert.isUndefined(Pgoutput.change(decoder, Uint8Array.from([0x42, ...new Array(20).fill(0)]), () => "0/1", 0))
  })
})
