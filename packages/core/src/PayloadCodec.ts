/**
 * How a topic's payload becomes the bytes of a Kafka record and back. A topic's `Schema` stays the
 * one source of its TypeScript type; the codec decides the wire format. The default is the
 * Schema's JSON (UTF-8), which needs nothing else; `@effect-outbox/schema-registry` provides codecs
 * that write Avro or JSON Schema payloads in the Confluent wire format, which consumers in other
 * languages, Kafka Connect and ksqlDB read through a Schema Registry.
 *
 * A codec encodes when the event is enqueued, so the outbox row holds the bytes that go on the
 * wire: the relay publishes them as they are and never needs the codec (nor a registry).
 *
 * ```ts
 * const Orders = Topic.make({ name: "orders", schema: OrderPlaced, codec: PayloadCodec.json(OrderPlaced) })
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { decodePayload } from "./OutboxMessage.ts"

const encoder = new TextEncoder()

/**
 * A payload that a codec cannot encode or decode. `reason` says what was wrong; a decoding failure
 * reaches the consumer as a `PayloadDecodeError` (permanent: dead-lettered at once).
 *
 * @since 0.1.0
 * @category errors
 */
export class PayloadCodecError extends Schema.TaggedError<PayloadCodecError>()("PayloadCodecError", {
  format: Schema.String,
  topic: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.format} payload of ${this.topic}: ${this.reason}`
  }
}

/**
 * A payload codec for values of `S["Type"]`. `RE` is what encoding needs (the producer side),
 * `RD` what decoding needs (the consumer side).
 *
 * @since 0.1.0
 * @category models
 */
export interface PayloadCodec<S extends Schema.Top, RE = never, RD = never> {
  /** The wire format, for errors and logs: `json`, `avro`, `json-schema`, … */
  readonly format: string
  readonly schema: S
  readonly encode: (topic: string, value: S["Type"]) => Effect.Effect<Uint8Array, PayloadCodecError, RE>
  readonly decode: (topic: string, payload: Uint8Array) => Effect.Effect<S["Type"], PayloadCodecError, RD>
}

/**
 * The default codec: the value through the Schema into JSON (UTF-8), what every topic without a
 * codec uses.
 *
 * @since 0.1.0
 * @category constructors
 */
export const json = <S extends Schema.Top>(
  schema: S
): PayloadCodec<S, S["EncodingServices"], S["DecodingServices"]> => {
  // The JSON codec is built once per topic, not per payload (building it is most of the cost).
  const toJson = Schema.encodeEffect(Schema.fromJsonString(schema))
  const encode = (value: S["Type"]) => Effect.map(toJson(value), (json) => encoder.encode(json))
  const decode = decodePayload(schema)
  const failure = (topic: string) => (error: Schema.SchemaError) =>
    new PayloadCodecError({ format: "json", topic, reason: error.message })
  return {
    format: "json",
    schema,
    encode: (topic, value) => Effect.mapError(encode(value), failure(topic)),
    decode: (topic, payload) => Effect.mapError(decode(payload), failure(topic))
  }
}
