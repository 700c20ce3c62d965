/**
 * The pgoutput messages the log source reads (proto_version 1, `messages 'true'`), whichever
 * transport brought them: rows of `pg_logical_slot_peek_binary_changes` or XLogData frames of the
 * streaming replication protocol carry the same bytes.
 */
import * as LogRecord from "@effect-outbox/core/LogRecord"
import { LogSourceError } from "@effect-outbox/core/LogSource"

export const TAG_BEGIN = 0x42 // 'B'
export const TAG_COMMIT = 0x43 // 'C'
export const TAG_MESSAGE = 0x4d // 'M'

/** `X/Y` (hex) as a number that orders like the position. */
export const lsnValue = (lsn: string): bigint => {
  const [hi = "0", lo = "0"] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) + BigInt(`0x${lo}`)
}

/** A position as PostgreSQL prints it (`X/Y`, hex). */
export const lsnText = (value: bigint): string =>
  `${(value >> 32n).toString(16).toUpperCase()}/${(value & 0xffffffffn).toString(16).toUpperCase()}`

/** Whether `data` holds `prefix` (NUL-terminated) at `at`. */
const prefixAt = (data: Uint8Array, at: number, prefix: Uint8Array) => {
  if (data[at + prefix.length] !== 0) return false
  for (let i = 0; i < prefix.length; i++) if (data[at + i] !== prefix[i]) return false
  return true
}

/**
 * The event of an 'M' message with our prefix; `undefined` for another prefix's message.
 * 'M', flags Int8, lsn Int64, prefix (NUL-terminated), length Int32, content.
 */
export const message = (
  data: Uint8Array,
  prefix: Uint8Array,
  at: string
): LogRecord.LogMessage | LogSourceError | undefined => {
  if (!prefixAt(data, 10, prefix)) return undefined
  const end = 10 + prefix.length
  const length = ((data[end + 1]! << 24) | (data[end + 2]! << 16) | (data[end + 3]! << 8) | data[end + 4]!) >>> 0
  const decoded = LogRecord.decode(data.subarray(end + 5, end + 5 + length))
  return decoded instanceof LogRecord.LogRecordError
    ? new LogSourceError({ operation: "log.read", reason: `at ${at}: ${decoded.reason}`, retriable: false })
    : decoded
}

/** The end LSN of a 'C' message: 'C', flags Int8, commit lsn Int64, end lsn Int64, timestamp Int64. */
export const commitEnd = (data: Uint8Array): bigint =>
  new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(10)
