/**
 * @platformatic/kafka messages as core `ConsumerRecord`s. Exported through
 * `PlatformaticConsumerSource`.
 *
 * @internal
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { Message } from "@platformatic/kafka"

export type RawMessage = Message<Buffer, Buffer, Buffer, Buffer>

/** Headers as strings, the first value of a repeated name kept. */
export const headersOf = (
  entries: Iterable<readonly [Buffer | null, Buffer | null | undefined]>
): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const [name, value] of entries) {
    if (name === null || value === null || value === undefined) continue
    const key = name.toString()
    if (!(key in headers)) headers[key] = value.toString()
  }
  return headers
}

export const toConsumerRecord = (message: RawMessage): ConsumerRecord => {
  const key = message.key as Buffer | null | undefined
  const value = message.value as Buffer | null | undefined
  return {
    topic: message.topic,
    partition: message.partition,
    offset: message.offset.toString(),
    key: key === null || key === undefined ? null : key.toString(),
    headers: headersOf(message.headers ?? new Map<Buffer, Buffer>()),
    value: value === null || value === undefined ? new Uint8Array(0) : new Uint8Array(value),
    timestamp: Number(message.timestamp)
  }
}
