/**
 * How many bytes a record takes in a Kafka record batch (format v2), and the one size limit the
 * library checks it against. The broker refuses a record batch larger than the topic's
 * `max.message.bytes` (`MESSAGE_TOO_LARGE`); one batch holds every record a producer request
 * sends to one partition. So enqueue refuses a record that cannot fit even alone, and publishers
 * split a partition's records into batches under the limit.
 *
 * @since 0.1.0
 */

/**
 * Kafka's default `max.message.bytes` (topic) / `message.max.bytes` (broker): 1 MiB plus the
 * 12-byte log overhead, 1,048,588. The enqueue limit and the publishers' default per-partition
 * batch limit when the broker does not say otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 1_048_588

/**
 * The fixed part of a record batch: base offset, length, leader epoch, magic, CRC, attributes,
 * last offset delta, first and max timestamps, producer id and epoch, base sequence, record count.
 *
 * @since 0.1.0
 * @category constants
 */
export const RECORD_BATCH_OVERHEAD = 61

/**
 * The parts of a record that take space on the wire.
 *
 * @since 0.1.0
 * @category models
 */
export interface SizedRecord {
  readonly key: string | null
  readonly headers: Readonly<Record<string, string>>
  readonly payload: Uint8Array
}

/** UTF-8 length without allocating (core stays free of Node's Buffer). */
const utf8 = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code < 0x80) bytes += 1
    else if (code < 0x800) bytes += 2
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      bytes += 4 // a surrogate pair is one 4-byte code point
      i++
    } else bytes += 3
  }
  return bytes
}

/** Bytes of a zig-zag varint, as Kafka encodes lengths and deltas. */
const varint = (value: number): number => {
  let zigzag = value >= 0 ? value * 2 : -value * 2 - 1
  let bytes = 1
  while (zigzag >= 128) {
    zigzag = Math.floor(zigzag / 128)
    bytes++
  }
  return bytes
}

const sizedBytes = (length: number | null): number => (length === null ? varint(-1) : varint(length) + length)

/**
 * Bytes of one record inside a batch. `offsetDelta` is its index in the batch; the timestamp
 * delta is counted at 3 bytes (up to ~17 minutes between the batch's first and this record's
 * timestamp, far more than a producer takes to build a request), so the estimate is an upper
 * bound for uncompressed batches.
 *
 * @since 0.1.0
 * @category sizes
 */
export const recordBytes = (record: SizedRecord, offsetDelta = 0): number => {
  let body = 1 + 3 + varint(offsetDelta) // attributes, timestamp delta, offset delta
  body += sizedBytes(record.key === null ? null : utf8(record.key))
  body += sizedBytes(record.payload.byteLength)
  const headers = record.headers
  let count = 0
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue
    count++
    body += sizedBytes(utf8(name)) + sizedBytes(utf8(headers[name]!))
  }
  body += varint(count)
  return varint(body) + body
}

/**
 * Bytes of a record batch holding this record alone: what must stay within `max.message.bytes`
 * for the record to be publishable at all.
 *
 * @since 0.1.0
 * @category sizes
 */
export const singleRecordBatchBytes = (record: SizedRecord): number => RECORD_BATCH_OVERHEAD + recordBytes(record)

/**
 * The bytes of one uncompressed record batch holding `records`, in order.
 *
 * @since 0.1.0
 * @category sizes
 */
export const batchBytes = (records: ReadonlyArray<SizedRecord>): number =>
  records.reduce((sum, record, i) => sum + recordBytes(record, i), RECORD_BATCH_OVERHEAD)

/**
 * Splits records bound for one partition into consecutive runs (order kept) whose record batch
 * stays within `limit` bytes. A record too large to fit even alone gets a run of its own; the
 * broker (or the caller) decides its fate.
 *
 * @since 0.1.0
 * @category sizes
 */
export const splitByBatchBytes = <A extends SizedRecord>(records: ReadonlyArray<A>, limit: number): Array<Array<A>> => {
  const runs: Array<Array<A>> = []
  let run: Array<A> = []
  let bytes = RECORD_BATCH_OVERHEAD
  for (const record of records) {
    const size = recordBytes(record, run.length)
    if (run.length > 0 && bytes + size > limit) {
      runs.push(run)
      run = []
      bytes = RECORD_BATCH_OVERHEAD
    }
    bytes += run.length === 0 ? recordBytes(record, 0) : size
    run.push(record)
  }
  if (run.length > 0) runs.push(run)
  return runs
}

/**
 * What to tell a person whose record is too large.
 *
 * @since 0.1.0
 * @category sizes
 */
export const describeTooLarge = (record: SizedRecord, limit: number): string => {
  const headerBytes = Object.entries(record.headers).reduce((sum, [n, v]) => sum + utf8(n) + utf8(v), 0)
  return (
    `the record takes ${singleRecordBatchBytes(record)} bytes in a record batch (payload ${record.payload.byteLength}, ` +
    `key ${record.key === null ? 0 : utf8(record.key)}, headers ${headerBytes}), over the limit of ${limit}: ` +
    `make the payload smaller (store large content elsewhere and send a reference), or raise the topic's ` +
    `max.message.bytes and the outbox limit (OUTBOX_MAX_RECORD_BYTES) together`
  )
}

/**
 * The most bytes a Kafka publisher puts in one produce request holding several partitions:
 * far below the broker's `socket.request.max.bytes` (100 MiB). A larger call is sent
 * one request per partition, where a round trip per partition is a small share of the time.
 *
 * @since 0.1.0
 * @category sizes
 */
export const MAX_COMBINED_BYTES = 8 * 1024 * 1024

/**
 * Whether a call's partitions can go in one produce request: each partition's records fit one
 * record batch under its topic's limit, and all together stay under {@link MAX_COMBINED_BYTES}.
 *
 * @since 0.1.0
 * @category sizes
 */
export const fitsOneRequest = (
  groups: ReadonlyArray<{ readonly topic: string; readonly records: ReadonlyArray<SizedRecord> }>,
  limitOf: (topic: string) => number
): boolean => {
  let total = 0
  for (const group of groups) {
    const bytes = batchBytes(group.records)
    total += bytes
    if (bytes > limitOf(group.topic) || total > MAX_COMBINED_BYTES) return false
  }
  return true
}
