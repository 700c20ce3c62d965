/**
 * Typed topics: a topic is declared once — name, payload `Schema`, key function, optional
 * partitioner — and that one declaration types both the producer's `Topic.enqueue` and the
 * consumer's decoded handler input, so the two sides cannot disagree on a payload. A record that
 * does not decode reaches the handler never: the consumer fails it with a typed
 * `Consumer.PayloadDecodeError`, classified permanent, and dead-letters it at once.
 *
 * ```ts
 * const OrderPlaced = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
 * const Orders = Topic.make({ name: "orders", schema: OrderPlaced, key: (order) => order.orderId })
 *
 * // producer: in the same transaction as the order row
 * Outbox.withTransaction(Effect.gen(function*() {
 *   yield* saveOrder(order)
 *   yield* Topic.enqueue(Orders, order)
 * }))
 *
 * // consumer: `message.payload` is an `OrderPlaced`
 * Consumer.run(Topic.consumer(Orders, { groupId: "billing", handler: (message) => bill(message.payload) }))
 * ```
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as ClaimCheck from "./ClaimCheck.ts"
import type * as Consumer from "./Consumer.ts"
import * as DeadLetter from "./DeadLetter.ts"
import { OutboxValidationError, type StoreError } from "./Errors.ts"
import * as Outbox from "./Outbox.ts"
import type { EventId, Headers, OutboxDraft } from "./OutboxMessage.ts"
import * as PayloadCodec from "./PayloadCodec.ts"

/**
 * A declared topic. `S` is the payload schema: `S["Type"]` is what producers hand in and what
 * handlers receive; the wire format is the codec's (default JSON of `S["Encoded"]`). `RE` / `RD`
 * are what the codec needs to encode / decode.
 *
 * @since 0.1.0
 * @category models
 */
export interface Topic<S extends Schema.Top, RE = S["EncodingServices"], RD = S["DecodingServices"]> {
  readonly name: string
  readonly schema: S
  /** The wire format of the payload (default `PayloadCodec.json(schema)`). */
  readonly codec: PayloadCodec.PayloadCodec<S, RE, RD>
  /** The ordering key of a payload (aggregate / user id): events of one key keep their order. */
  readonly key: (payload: S["Type"]) => string | null
  /** An explicit partition for a payload; `null` leaves it to the broker's partitioner. */
  readonly partition: (payload: S["Type"]) => number | null
  /** Where the consumer dead-letters this topic's poison records (default `<name>.DLT`). */
  readonly deadLetterTopic: string
}

/**
 * Declares a topic. Without `key`, events have no ordering key; without `partition`, the broker's
 * partitioner decides; without `codec`, the payload is the schema's JSON.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: {
  <S extends Schema.Top, RE, RD>(
    options: MakeOptions<S> & { readonly codec: PayloadCodec.PayloadCodec<S, RE, RD> }
  ): Topic<S, RE, RD>
  <S extends Schema.Top>(options: MakeOptions<S>): Topic<S>
} = <S extends Schema.Top>(
  options: MakeOptions<S> & { readonly codec?: PayloadCodec.PayloadCodec<S, unknown, unknown> }
) => ({
  name: options.name,
  schema: options.schema,
  codec: options.codec ?? PayloadCodec.json(options.schema),
  key: options.key ?? (() => null),
  partition: options.partition ?? (() => null),
  deadLetterTopic: options.deadLetterTopic ?? DeadLetter.defaultTopic(options.name)
})

/**
 * The options of {@link make} besides the codec.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions<S extends Schema.Top> {
  readonly name: string
  readonly schema: S
  readonly key?: ((payload: S["Type"]) => string | null) | undefined
  readonly partition?: ((payload: S["Type"]) => number | null) | undefined
  readonly deadLetterTopic?: string | undefined
}

/**
 * The payload type of a topic.
 *
 * @since 0.1.0
 * @category models
 */
export type Payload<T> = T extends Topic<infer S, infer _RE, infer _RD> ? S["Type"] : never

/**
 * Per-event options of {@link enqueue}. `partition` overrides the topic's partitioner (e.g. a
 * partition reserved by `PartitionAssignment`).
 *
 * @since 0.1.0
 * @category models
 */
export interface EnqueueOptions {
  readonly id?: EventId | undefined
  readonly headers?: Headers | undefined
  readonly partition?: number | null | undefined
  readonly availableAt?: number | undefined
  readonly prequeued?: boolean | undefined
}

/**
 * Encodes a payload through the topic's schema into an outbox draft. A payload the schema
 * refuses fails with `OutboxValidationError` (field `payload`) and nothing is written.
 *
 * @since 0.1.0
 * @category constructors
 */
export const draft = <S extends Schema.Top, RE, RD>(
  topic: Topic<S, RE, RD>,
  payload: S["Type"],
  options: EnqueueOptions = {}
): Effect.Effect<OutboxDraft, OutboxValidationError, RE> =>
  topic.codec.encode(topic.name, payload).pipe(
    Effect.mapError(
      (error) =>
        new OutboxValidationError({ field: "payload", reason: `does not encode as ${topic.name}: ${error.reason}` })
    ),
    Effect.map((bytes): OutboxDraft => {
      const partition = options.partition !== undefined ? options.partition : topic.partition(payload)
      return {
        topic: topic.name,
        key: topic.key(payload),
        payload: bytes,
        ...(partition === null ? {} : { partition }),
        ...(options.id === undefined ? {} : { id: options.id }),
        ...(options.headers === undefined ? {} : { headers: options.headers }),
        ...(options.availableAt === undefined ? {} : { availableAt: options.availableAt }),
        ...(options.prequeued === undefined ? {} : { prequeued: options.prequeued })
      }
    })
  )

/**
 * Enqueues one payload (returns its event id) on the topic in the ambient transaction, so it
 * commits with the caller's writes. A payload over a `ClaimCheckStore`'s threshold is stored
 * aside in the same transaction (`ClaimCheck`). It requires `Outbox.InTransaction`: run it inside
 * `Outbox.withTransaction`. The only way a typed payload reaches the broker is through the outbox.
 *
 * @since 0.1.0
 * @category producing
 */
export const enqueue = <S extends Schema.Top, RE, RD>(
  topic: Topic<S, RE, RD>,
  payload: S["Type"],
  options?: EnqueueOptions
): Effect.Effect<EventId, OutboxValidationError | StoreError, Outbox.Outbox | Outbox.InTransaction | RE> =>
  draft(topic, payload, options).pipe(
    Effect.flatMap(ClaimCheck.offload),
    Effect.flatMap((d) => Outbox.enqueue(d))
  )

/**
 * Enqueues one payload in a transaction of its own, committed before it returns: for an event
 * that goes with no write of yours. Anything that must commit with the event belongs in
 * `Outbox.withTransaction` with {@link enqueue} instead.
 *
 * @since 0.1.0
 * @category producing
 */
export const enqueueAutocommit = <S extends Schema.Top, RE, RD>(
  topic: Topic<S, RE, RD>,
  payload: S["Type"],
  options?: EnqueueOptions
): Effect.Effect<EventId, OutboxValidationError | StoreError, Outbox.Outbox | Exclude<RE, Outbox.InTransaction>> =>
  Outbox.withTransaction(enqueue(topic, payload, options))

/**
 * Enqueues several payloads in order (one insert) in the ambient transaction, returning their
 * event ids. Like {@link enqueue}, it runs inside `Outbox.withTransaction`.
 *
 * @since 0.1.0
 * @category producing
 */
export const enqueueAll = <S extends Schema.Top, RE, RD>(
  topic: Topic<S, RE, RD>,
  payloads: ReadonlyArray<S["Type"]>,
  options?: Omit<EnqueueOptions, "id">
): Effect.Effect<
  ReadonlyArray<EventId>,
  OutboxValidationError | StoreError,
  Outbox.Outbox | Outbox.InTransaction | RE
> =>
  Effect.flatMap(
    Effect.forEach(payloads, (payload) => Effect.flatMap(draft(topic, payload, options), ClaimCheck.offload)),
    (drafts) => Outbox.enqueue(drafts)
  )

/**
 * Consumer options for this topic: its name, its schema and codec (so the handler receives
 * `Consumer.Message<S["Type"]>`) and its dead-letter topic.
 *
 * @since 0.1.0
 * @category consuming
 */
export const consumer = <S extends Schema.Top, RE, RD, E, R>(
  topic: Topic<S, RE, RD>,
  options: Omit<Consumer.Options<S, E, R>, "topics" | "schema" | "codec">
): Consumer.Options<S, E, R | RD> => ({
  deadLetterTopic: () => topic.deadLetterTopic,
  ...options,
  topics: [topic.name],
  schema: topic.schema,
  codec: topic.codec
})
