/**
 * Shared pieces of the conformance suites: unique names, fixed times, draft rows.
 *
 * @internal
 */
import { type EventId, makeEventId, type NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"

/** A fixed "now" far from the epoch, so adapters storing real timestamps see plausible values. */
export const T0 = 1_767_225_600_000

/** A name no other test (or earlier run against a shared broker / database) uses. */
export const uniqueName = (prefix: string): string =>
  `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`

export interface MessageFields {
  readonly topic?: string
  readonly key?: string | null
  readonly partition?: number | null
  readonly headers?: Readonly<Record<string, string>>
  readonly payload?: Uint8Array
  readonly status?: "PENDING" | "PREQUEUED"
  readonly availableAt?: number
  readonly createdAt?: number
}

export const newMessage = (fields: MessageFields = {}): Effect.Effect<NewOutboxMessage> =>
  Effect.map(makeEventId, (id: EventId) => ({
    id,
    topic: fields.topic ?? "conformance",
    key: fields.key === undefined ? "k" : fields.key,
    partition: fields.partition ?? null,
    headers: { "event-id": id, ...fields.headers },
    payload: fields.payload ?? new TextEncoder().encode(`payload of ${id}`),
    status: fields.status ?? "PENDING",
    availableAt: fields.availableAt ?? T0,
    createdAt: fields.createdAt ?? T0
  }))

export const newMessages = (fields: ReadonlyArray<MessageFields>): Effect.Effect<Array<NewOutboxMessage>> =>
  Effect.forEach(fields, newMessage)

export interface RequestFields {
  readonly key?: string | null
  readonly partition?: number | null
  readonly headers?: Readonly<Record<string, string>>
  readonly payload?: Uint8Array
}

/** A publish request with a fresh event id in its `event-id` header. */
export const publishRequest = (topic: string, fields: RequestFields = {}): Effect.Effect<PublishRequest> =>
  Effect.map(makeEventId, (id) => ({
    id,
    topic,
    key: fields.key ?? null,
    partition: fields.partition ?? null,
    headers: { "event-id": id, ...fields.headers },
    payload: fields.payload ?? new TextEncoder().encode(`payload of ${id}`)
  }))
