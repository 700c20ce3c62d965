/**
 * kafkajs messages as core `ConsumerRecord`s. Exported through `KafkaConsumerSource`.
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type Kafkajs from "kafkajs"

const headersOf = (headers: Kafkajs.IHeaders | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (headers === undefined) return out
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    const first = Array.isArray(value) ? value[0] : value
    if (first !== undefined) out[name] = first.toString()
  }
  return out
}

/**
 * @since 0.1.0
 * @category encoding
 */
export const toConsumerRecord = (topic: string, partition: number, message: Kafkajs.KafkaMessage): ConsumerRecord => ({
  topic,
  partition,
  offset: message.offset,
  key: message.key === null || message.key === undefined ? null : message.key.toString(),
  headers: headersOf(message.headers),
  value:
    message.value === null
      ? new Uint8Array(0)
      : new Uint8Array(message.value.buffer, message.value.byteOffset, message.value.byteLength),
  timestamp: Number(message.timestamp)
})
