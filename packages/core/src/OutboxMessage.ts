/**
 * The stored event and the draft domain code hands in.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import { eventIdAt } from "./internal/ids/eventId.ts"
import type { OutboxStatus } from "./Lifecycle.ts"

/**
 * A time-ordered UUIDv7: the event's identity everywhere, the `event-id` header on the Kafka
 * record and the dedup key downstream.
 *
 * @since 0.1.0
 * @category models
 */
export const EventId = Schema.String.check(Schema.isUUID()).pipe(Schema.brand("@effect-outbox/EventId"))

/**
 * @since 0.1.0
 * @category models
 */
export type EventId = typeof EventId.Type

// `Schema.isUUID()`'s pattern, tested directly: the relay checks every event it reads, and the
// schema's parser costs microseconds per call where the pattern costs tens of nanoseconds. A test
// holds the two to the same answers.
const UUID =
  /^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|[fF]{8}-[fF]{4}-[fF]{4}-[fF]{4}-[fF]{12})$/

/**
 * Whether a value is an event id: the library's one UUID check (drafts, stores, consumers and
 * the CLI all ask it, so an id one of them accepts the others accept too).
 *
 * @since 0.1.0
 * @category guards
 */
export const isEventId = (value: unknown): value is EventId => typeof value === "string" && UUID.test(value)

/**
 * The header that carries the event id on every published record.
 *
 * @since 0.1.0
 * @category constants
 */
export const EVENT_ID_HEADER = "event-id"

/**
 * The header a replayed dead letter carries with the coordinates of the record as first
 * consumed, `<topic>/<partition>/<offset>`: the offset identity of the replay is the
 * original's, so a group that handled the original under it does not handle the replay again.
 *
 * @since 0.1.0
 * @category constants
 */
export const ORIGINAL_RECORD_HEADER = "outbox-original-record"

/**
 * The header a replayed dead letter carries with the broker timestamp (epoch millis) of the
 * record as first consumed: the inbox keeps a record by its event's time, and a replay of an
 * event without a time in its id keeps the original's.
 *
 * @since 0.1.0
 * @category constants
 */
export const ORIGINAL_TIMESTAMP_HEADER = "outbox-original-timestamp"

/**
 * Generates a UUIDv7 from the `Clock` and the `Random` service, so a seeded simulation replays
 * the same ids.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEventId: Effect.Effect<EventId> = Effect.withFiber((fiber) =>
  Effect.succeed(eventIdAt(fiber.getRef(Clock.Clock).currentTimeMillisUnsafe(), fiber.getRef(Random.Random)) as EventId)
)

/**
 * String headers stored with the event and sent with the record.
 *
 * @since 0.1.0
 * @category models
 */
export const Headers = Schema.Record(Schema.String, Schema.String)

/**
 * @since 0.1.0
 * @category models
 */
export type Headers = typeof Headers.Type

/**
 * Where the broker put a record.
 *
 * @since 0.1.0
 * @category models
 */
export const PublishReceipt = Schema.Struct({
  topic: Schema.String,
  partition: Schema.Int,
  /** Kafka offsets are int64: kept as a decimal string. */
  offset: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export type PublishReceipt = typeof PublishReceipt.Type

/**
 * What domain code hands to `Outbox.enqueue`. Validated before anything is written.
 *
 * - `key`: the ordering key (aggregate / user id). Events of one key are published in creation
 *   order. No key: no ordering promise.
 * - `partition`: an explicit target partition, else the broker's partitioner decides.
 * - `availableAt`: epoch millis before which the relay will not publish it.
 * - `prequeued`: store as `PREQUEUED`, held until `Outbox.release`.
 *
 * @since 0.1.0
 * @category models
 */
export const OutboxDraft = Schema.Struct({
  id: Schema.optionalKey(EventId),
  topic: Schema.String,
  key: Schema.optionalKey(Schema.NullOr(Schema.String)),
  partition: Schema.optionalKey(Schema.NullOr(Schema.Int)),
  headers: Schema.optionalKey(Headers),
  payload: Schema.Uint8Array,
  availableAt: Schema.optionalKey(Schema.Number),
  prequeued: Schema.optionalKey(Schema.Boolean)
})

/**
 * @since 0.1.0
 * @category models
 */
export type OutboxDraft = typeof OutboxDraft.Type

/**
 * A validated draft with its id and times resolved: what a store inserts.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewOutboxMessage {
  readonly id: EventId
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: Headers
  readonly payload: Uint8Array
  readonly status: "PENDING" | "PREQUEUED"
  readonly availableAt: number
  readonly createdAt: number
}

/**
 * The `availableAt` of a row set aside behind its key's head while that head waits (backing off,
 * or refused because its partition has no leader): 9999-12-31T00:00:00Z. The row cannot go
 * before its head anyway, and set aside once it is out of the relay's way for as long as the head
 * waits, however many rounds that takes. It comes back (available again, at its `createdAt`)
 * once the head has gone (published, failed, skipped or deleted) and nothing of its key is in
 * flight. A draft's `availableAt` must be earlier.
 *
 * @since 0.1.0
 * @category models
 */
export const BEHIND_ITS_HEAD = 253_402_214_400_000

/**
 * A stored event. Times are epoch milliseconds.
 *
 * - `seq`: insertion order, assigned by the store; with `key` it defines per-key order.
 * - `leaseOwner` / `leaseExpiresAt`: set while `DISPATCHING`.
 * - `receipt`: where the broker put it, once known.
 *
 * @since 0.1.0
 * @category models
 */
export interface OutboxMessage {
  readonly id: EventId
  readonly seq: number
  readonly topic: string
  readonly key: string | null
  readonly partition: number | null
  readonly headers: Headers
  readonly payload: Uint8Array
  readonly status: OutboxStatus
  readonly attempts: number
  readonly availableAt: number
  readonly leaseOwner: string | null
  readonly leaseExpiresAt: number | null
  readonly receipt: PublishReceipt | null
  readonly lastError: string | null
  readonly createdAt: number
  readonly updatedAt: number
  readonly publishedAt: number | null
  readonly processedAt: number | null
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Encodes a JSON value as a payload (UTF-8).
 *
 * @since 0.1.0
 * @category payload
 */
export const jsonPayload = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value))

/**
 * The payload codec: a value through a Schema into JSON bytes (UTF-8). `Topic` encodes with it;
 * the consumer decodes with {@link decodePayload}, so both sides of a topic read one format.
 *
 * @since 0.1.0
 * @category payload
 */
export const encodePayload =
  <S extends Schema.Top>(schema: S) =>
  (value: S["Type"]): Effect.Effect<Uint8Array, Schema.SchemaError, S["EncodingServices"]> =>
    Effect.map(Schema.encodeEffect(Schema.fromJsonString(schema))(value), (json) => encoder.encode(json))

/**
 * Decodes a JSON payload (UTF-8) through a Schema: the other half of {@link encodePayload}.
 *
 * @since 0.1.0
 * @category payload
 */
export const decodePayload = <S extends Schema.Top>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.fromJsonString(schema))
  return (payload: Uint8Array): Effect.Effect<S["Type"], Schema.SchemaError, S["DecodingServices"]> =>
    decode(decoder.decode(payload))
}
