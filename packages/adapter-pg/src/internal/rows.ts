import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, Headers, OutboxMessage } from "@effect-outbox/core/OutboxMessage"

/** A `<prefix>message` row as the driver decodes it (binary protocol). */
export interface MessageRow {
  readonly id: string
  readonly seq: bigint | number | string
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: unknown
  readonly payload: Uint8Array
  readonly status: string
  readonly attempts: number
  readonly available_at: Date | number | string
  readonly lease_owner: string | null
  readonly lease_expires_at: Date | number | string | null
  readonly published_partition: number | null
  readonly published_offset: bigint | number | string | null
  readonly last_error: string | null
  readonly created_at: Date | number | string
  readonly updated_at: Date | number | string
  readonly published_at: Date | number | string | null
  readonly processed_at: Date | number | string | null
}

/** Epoch millis of a decoded timestamp; a client with custom codecs may hand back numbers or text. */
export const millis = (value: Date | number | string): number =>
  value instanceof Date ? value.getTime() : typeof value === "number" ? value : new Date(value).getTime()

const millisOrNull = (value: Date | number | string | null): number | null => (value === null ? null : millis(value))

const headersOf = (value: unknown): Headers => {
  const parsed = typeof value === "string" ? JSON.parse(value) : value
  const out: Record<string, string> = {}
  if (parsed !== null && typeof parsed === "object") {
    const record = parsed as Record<string, unknown>
    for (const k in record) {
      if (Object.hasOwn(record, k)) out[k] = String(record[k])
    }
  }
  return out
}

export const toMessage = (row: MessageRow): OutboxMessage => ({
  id: row.id as EventId,
  seq: Number(row.seq),
  topic: row.topic,
  key: row.key,
  partition: row.partition,
  headers: headersOf(row.headers),
  payload: row.payload,
  status: row.status as OutboxStatus,
  attempts: row.attempts,
  availableAt: millis(row.available_at),
  leaseOwner: row.lease_owner,
  leaseExpiresAt: millisOrNull(row.lease_expires_at),
  receipt:
    row.published_partition === null || row.published_offset === null
      ? null
      : { topic: row.topic, partition: row.published_partition, offset: String(row.published_offset) },
  lastError: row.last_error,
  createdAt: millis(row.created_at),
  updatedAt: millis(row.updated_at),
  publishedAt: millisOrNull(row.published_at),
  processedAt: millisOrNull(row.processed_at)
})

/** Orders by `seq`: RETURNING gives rows in no particular order. */
export const bySeq = (a: OutboxMessage, b: OutboxMessage) => a.seq - b.seq
