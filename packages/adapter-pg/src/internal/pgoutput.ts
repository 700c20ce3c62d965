/**
 * The pgoutput messages the log source reads (proto_version 1, `binary 'true'`, a publication
 * of the event table alone, inserts only), whichever transport brought them: rows of
 * `pg_logical_slot_peek_binary_changes` or XLogData frames of the streaming replication protocol
 * carry the same bytes. Logical messages (`pg_logical_emit_message`) are never asked for
 * (`messages` stays off), so no role can put an event into the log without an INSERT grant.
 *
 * Every insert becomes a `LogMessage`; one that does not decode or validate is flagged
 * `invalid` (never a failed read): the relay must not publish it.
 */
import * as LogRecord from "@effect-outbox/core/LogRecord"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Bytes from "./logBytes.ts"

export const TAG_BEGIN = 0x42 // 'B'
export const TAG_COMMIT = 0x43 // 'C'
export const TAG_RELATION = 0x52 // 'R'
export const TAG_INSERT = 0x49 // 'I'

/** `X/Y` (hex) as a number that orders like the position. */
export const lsnValue = (lsn: string): bigint => {
  const [hi = "0", lo = "0"] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`)
}

/** A position as PostgreSQL prints it (`X/Y`, hex). */
export const lsnText = (value: bigint): string =>
  `${(value >> 32n).toString(16).toUpperCase()}/${(value & 0xffffffffn).toString(16).toUpperCase()}`

/** The end LSN of a 'C' message: 'C', flags Int8, commit lsn Int64, end lsn Int64, timestamp Int64. */
export const commitEnd = (data: Uint8Array): bigint =>
  new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(10)

/** Where the id and the record are in a relation's tuples. */
interface Layout {
  readonly name: string
  readonly id: number
  readonly record: number
}

/** What a decoder remembers across messages: the relations the server described. */
export interface Decoder {
  readonly relations: Map<number, Layout>
  /** The event table's unqualified name, to tell its rows from any other's. */
  readonly table: string
}

export const makeDecoder = (table: string): Decoder => ({ relations: new Map(), table })

/**
 * 'R': relation id Int32, namespace String, name String, replica identity Int8, columns Int16,
 * then per column: flags Int8, name String, type oid Int32, type modifier Int32.
 */
const relation = (decoder: Decoder, data: Uint8Array) => {
  const reader = Bytes.reader(data, 1)
  const id = reader.u32()
  reader.cstring()
  const name = reader.cstring()
  reader.u8()
  const count = reader.u16()
  const columns: Array<string> = []
  for (let i = 0; i < count; i++) {
    reader.u8()
    columns.push(reader.cstring())
    reader.u32()
    reader.u32()
  }
  decoder.relations.set(id, { name, id: columns.indexOf("id"), record: columns.indexOf("record") })
}

/**
 * A deterministic stand-in id for an entry whose own id is unknown: its position and its index in
 * the transaction, as a version-8 ("custom") UUID, so it passes every event id check.
 */
const positionId = (at: string, index: number): EventId => {
  const hex = ((lsnValue(at) << 16n) | BigInt(index & 0xffff)).toString(16).padStart(20, "0").slice(-20)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(12, 15)}-b${hex.slice(15, 18)}-${hex.slice(18)}0000000000` as EventId
}

/** The epoch millis in a UUIDv7 (its first 48 bits); 0 when the id is not a UUID. */
const idMillis = (id: string): number => {
  const ms = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
  return Number.isFinite(ms) ? ms : 0
}

/** An entry that is not a valid event; `createdAt` from the row's id (0 for a stand-in id). */
const flagged = (
  id: EventId,
  payload: Uint8Array,
  reason: string,
  topic: unknown = "",
  standIn = false
): LogRecord.LogMessage => ({
  id,
  topic: typeof topic === "string" ? topic : "",
  key: null,
  partition: null,
  headers: {},
  payload: payload.slice(),
  createdAt: standIn ? 0 : idMillis(id),
  invalid: reason
})

/** The event of one row of the event table, validated (also for rows read from the table itself). */
export const event = (id: EventId, record: Uint8Array): LogRecord.LogMessage => {
  const decoded = LogRecord.decode(record)
  if (decoded instanceof LogRecord.LogRecordError) return flagged(id, record, decoded.reason)
  if (decoded.id !== id) return flagged(id, record, `the record's id ${String(decoded.id)} is not the row's id ${id}`)
  const reason = LogRecord.validate(decoded)
  return reason === undefined ? decoded : flagged(id, record, reason, decoded.topic)
}

/** A flagged entry under a stand-in id from its position (its own id unknown). */
const standIn = (at: () => string, index: number, payload: Uint8Array, reason: string) =>
  flagged(positionId(at(), index), payload, reason, "", true)

/** A big-endian u32 at `at`; past the end of `data` a RangeError (the message is truncated). */
const u32At = (data: Uint8Array, at: number): number => {
  if (at + 4 > data.byteLength) throw new RangeError(`message ends at ${data.byteLength}, needed ${at + 4}`)
  return ((data[at]! << 24) | (data[at + 1]! << 16) | (data[at + 2]! << 8) | data[at + 3]!) >>> 0
}

const KIND_TEXT = 0x74 // 't'
const KIND_BINARY = 0x62 // 'b'

/**
 * 'I': relation id Int32, 'N', then the tuple: columns Int16, per column a kind ('n' null,
 * 'u' unchanged, 't' text, 'b' binary) and for 't'/'b' an Int32 length and the bytes. Read in
 * one pass over the bytes, keeping only where the id and the record are: every event of the
 * log comes through here.
 */
const insert = (decoder: Decoder, data: Uint8Array, at: () => string, index: number): LogRecord.LogMessage => {
  const layout = decoder.relations.get(u32At(data, 1))
  if (data.byteLength < 8) throw new RangeError(`message ends at ${data.byteLength}, needed 8`)
  const count = (data[6]! << 8) | data[7]!
  const idColumn = layout?.id ?? 0
  const recordColumn = layout?.record ?? 1
  let offset = 8
  let idKind = 0
  let idStart = 0
  let idEnd = 0
  let recordKind = 0
  let recordStart = 0
  let recordEnd = 0
  for (let i = 0; i < count; i++) {
    if (offset >= data.byteLength) throw new RangeError(`message ends at ${data.byteLength}, needed ${offset + 1}`)
    const kind = data[offset++]!
    if (kind !== KIND_TEXT && kind !== KIND_BINARY) continue
    const length = u32At(data, offset)
    const start = offset + 4
    offset = start + length
    if (offset > data.byteLength) throw new RangeError(`message ends at ${data.byteLength}, needed ${offset}`)
    if (i === idColumn) {
      idKind = kind
      idStart = start
      idEnd = offset
    } else if (i === recordColumn) {
      recordKind = kind
      recordStart = start
      recordEnd = offset
    }
  }
  if (layout !== undefined && layout.name !== decoder.table) {
    return standIn(at, index, data, `a row of ${layout.name}, not of the event table ${decoder.table}`)
  }
  if (recordKind === 0) return standIn(at, index, new Uint8Array(0), "the row has no record")
  const recordBytes = data.subarray(recordStart, recordEnd)
  const record = recordKind === KIND_BINARY ? recordBytes : Bytes.fromHexText(recordBytes)
  if (idKind === 0) return standIn(at, index, record, "the row has no id")
  if (idKind === KIND_BINARY && idEnd - idStart === 16) return binaryIdEvent(data, idStart, record)
  const idBytes = data.subarray(idStart, idEnd)
  return event((idKind === KIND_BINARY ? Bytes.uuidText(idBytes) : Bytes.text(idBytes)) as EventId, record)
}

/**
 * `event` for a row whose id is a binary uuid at `data[start]` (the usual case): the record's id
 * is compared with those 16 bytes, and the id's text is built only for an entry that is flagged.
 */
const binaryIdEvent = (data: Uint8Array, start: number, record: Uint8Array): LogRecord.LogMessage => {
  const decoded = LogRecord.decode(record)
  if (decoded instanceof LogRecord.LogRecordError) return flagged(rowId(data, start), record, decoded.reason)
  if (!Bytes.isUuidTextOf(decoded.id, data, start)) {
    const id = rowId(data, start)
    return flagged(id, record, `the record's id ${String(decoded.id)} is not the row's id ${id}`)
  }
  const reason = LogRecord.validate(decoded)
  return reason === undefined ? decoded : flagged(decoded.id, record, reason, decoded.topic)
}

const rowId = (data: Uint8Array, start: number) => Bytes.uuidText(data.subarray(start, start + 16)) as EventId

/**
 * The event of one pgoutput message, or `undefined` for a message that carries none (begin,
 * commit, relation, type, origin). `at` (the message's position, asked only for an entry whose
 * id is unknown) and `index` (its number in the transaction) make a stand-in id.
 */
export const change = (
  decoder: Decoder,
  data: Uint8Array,
  at: () => string,
  index: number
): LogRecord.LogMessage | undefined => {
  const tag = data[0]
  if (tag === TAG_INSERT) {
    try {
      return insert(decoder, data, at, index)
    } catch (cause) {
      return flagged(positionId(at(), index), data, `undecodable insert message: ${String(cause)}`, "", true)
    }
  }
  if (tag === TAG_RELATION) {
    try {
      relation(decoder, data)
    } catch {
      // A relation we cannot read leaves its inserts on the default layout (id, record).
    }
  }
  return undefined
}

/**
 * Stamps `entries[from..]` with their transaction's commit position, in place: the entries are
 * this decoder's own, fresh objects (a copy per event cost an allocation per event).
 */
export const stamp = (entries: ReadonlyArray<LogRecord.LogMessage>, from: number, position: string): void => {
  for (let i = from; i < entries.length; i++) (entries[i] as { position?: string }).position = position
}

/** The options both transports start pgoutput with. */
export const options = (publication: string) =>
  ({ proto_version: "1", publication_names: publication, binary: "true" }) as const
