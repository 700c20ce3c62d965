/**
 * How the log engine carries one event: the bytes of its row in the event table (or any log
 * source's entry). Pure: encode on enqueue, decode and {@link validate} in the relay.
 *
 * Layout: version byte `1`, a big-endian u32 length, that many bytes of JSON metadata (id, topic,
 * key, partition, headers, createdAt), then the payload bytes as they are.
 *
 * @since 0.1.0
 */

import { LogRecordError } from "./Errors.ts"
import * as Bytes from "./internal/bytes/blocks.ts"
import { scratchEncoder } from "./internal/bytes/utf8.ts"
import { type EventId, type Headers, isEventId } from "./OutboxMessage.ts"
import { aboveMaximum } from "./PartitionLimit.ts"

/**
 * One event as the log carries it.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogMessage {
  readonly id: EventId
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: Headers
  readonly payload: Uint8Array
  /** Epoch millis of the enqueue (the writer's clock): where a broker probe starts looking. */
  readonly createdAt: number
  /**
   * Set by the source for an entry that fails validation (bad metadata, non-string key or
   * header, illegal topic, partition out of range, unknown version): why. Such a message carries
   * what could be decoded and `payload` = the raw bytes. The relay never publishes it.
   */
  readonly invalid?: string | undefined
  /**
   * The commit position of the transaction the entry belongs to, when the source knows it, in the
   * same terms as `LogWindow.upTo`: an entry is covered by every window whose `upTo` is at or past it.
   */
  readonly position?: string | undefined
}

export {
  /**
   * An entry of the log that is not an event of this library (wrong version, bad metadata).
   *
   * @since 0.1.0
   * @category errors
   */
  LogRecordError
} from "./Errors.ts"

const VERSION = 1
const decoder = new TextDecoder()

// The metadata's UTF-8 is written into a kept buffer first (up to 64 KiB), then copied after the header.
const utf8 = scratchEncoder(1024, 64 * 1024)

/**
 * The bytes are a view into a shared block (`internal/bytes/blocks.ts`): read them through
 * `byteOffset`, as every `Uint8Array` consumer must.
 *
 * @since 0.1.0
 * @category codec
 */
export const encode = (message: LogMessage): Uint8Array => {
  const meta = utf8(
    JSON.stringify({
      id: message.id,
      topic: message.topic,
      key: message.key,
      partition: message.partition,
      headers: message.headers,
      createdAt: message.createdAt
    })
  )
  const metaLength = meta.byteLength
  const out = Bytes.alloc(5 + metaLength + message.payload.byteLength)
  out[0] = VERSION
  out[1] = metaLength >>> 24
  out[2] = (metaLength >>> 16) & 0xff
  out[3] = (metaLength >>> 8) & 0xff
  out[4] = metaLength & 0xff
  out.set(meta, 5)
  out.set(message.payload, 5 + metaLength)
  return out
}

/**
 * @since 0.1.0
 * @category codec
 */
export const decode = (bytes: Uint8Array): LogMessage | LogRecordError => {
  if (bytes.byteLength < 5)
    return new LogRecordError({ reason: `${bytes.byteLength} bytes is shorter than the header` })
  const version = bytes[0]!
  if (version !== VERSION) return new LogRecordError({ reason: `version ${version}, expected ${VERSION}` })
  // Read by hand: a DataView per record costs more than the four bytes it reads.
  const length = ((bytes[1]! << 24) | (bytes[2]! << 16) | (bytes[3]! << 8) | bytes[4]!) >>> 0
  if (5 + length > bytes.byteLength)
    return new LogRecordError({ reason: `metadata length ${length} runs past the end` })
  try {
    const meta = JSON.parse(decoder.decode(bytes.subarray(5, 5 + length)))
    if (typeof meta?.id !== "string" || typeof meta.topic !== "string" || typeof meta.createdAt !== "number") {
      return new LogRecordError({ reason: "metadata lacks id, topic or createdAt" })
    }
    return {
      id: meta.id,
      topic: meta.topic,
      key: meta.key ?? null,
      partition: meta.partition ?? null,
      headers: meta.headers ?? {},
      createdAt: meta.createdAt,
      // A copy (the driver's buffer may be reused), carved from a shared block.
      payload: Bytes.copy(bytes.subarray(5 + length))
    }
  } catch (cause) {
    return new LogRecordError({ reason: `metadata is not JSON: ${String(cause)}` })
  }
}

// Kafka's topic rule, the one `Outbox.prepare` applies to drafts.
const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/

/**
 * Why a decoded entry is not an event this library would have written (the checks
 * `Outbox.prepare` makes on a draft), or `undefined` when it is one. Whoever can write the log
 * can write anything into it: the relay publishes only what passes.
 *
 * @since 0.1.0
 * @category validation
 */
export const validate = (message: LogMessage, maxPartition?: number): string | undefined => {
  if (!isEventId(message.id)) return `id ${JSON.stringify(message.id)} is not a UUID`
  if (
    typeof message.topic !== "string" ||
    !TOPIC.test(message.topic) ||
    message.topic === "." ||
    message.topic === ".."
  )
    return `topic ${JSON.stringify(message.topic)} is not a legal Kafka topic name`
  if (message.key !== null && typeof message.key !== "string") return `key is a ${typeof message.key}, not a string`
  const partition = message.partition
  if (partition !== null) {
    if (typeof partition !== "number" || !Number.isInteger(partition) || partition < 0)
      return `partition ${JSON.stringify(partition)} is not an integer >= 0`
    const above = aboveMaximum(partition, maxPartition)
    if (above !== undefined) return above
  }
  if (typeof message.headers !== "object" || message.headers === null || Array.isArray(message.headers))
    return "headers are not an object"
  const headers = message.headers
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue
    const value: unknown = headers[name]
    if (typeof value !== "string") return `header ${JSON.stringify(name)} is a ${typeof value}, not a string`
  }
  if (typeof message.createdAt !== "number" || !Number.isFinite(message.createdAt)) return "createdAt is not a number"
  return undefined
}
