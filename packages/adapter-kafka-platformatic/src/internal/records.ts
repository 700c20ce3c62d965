/**
 * @platformatic/kafka messages as core `ConsumerRecord`s. Exported through
 * `PlatformaticConsumerSource`.
 *
 * @internal
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { Message } from "@platformatic/kafka"

export type RawMessage = Message<Buffer, Buffer, Buffer, Buffer>

export const toConsumerRecord = (message: RawMessage): ConsumerRecord => {
  const headers: Record<string, string> = {}
  for (const [name, value] of message.headers ?? new Map<Buffer, Buffer>()) {
    const key = name.toString()
    if (!(key in headers) && value !== undefined && value !== null) headers[key] = value.toString()
  }
  const key = message.key as Buffer | null | undefined
  const value = message.value as Buffer | null | undefined
  return {
    topic: message.topic,
    partition: message.partition,
    offset: message.offset.toString(),
    key: key === null || key === undefined ? null : key.toString(),
    headers,
    value: value === null || value === undefined ? new Uint8Array(0) : new Uint8Array(value),
    timestamp: Number(message.timestamp)
  }
}
