/**
 * The domain-facing outbox: domain code enqueues events in the same
 * transaction as its state change, and releases deferred (`PREQUEUED`) ones.
 *
 * `enqueue` requires {@link InTransaction}, which only {@link withTransaction} provides: an event
 * committed on its own could outlive a state change that then fails, so that does not compile.
 * Your `SqlClient` writes inside `withTransaction` share its transaction; nested calls join it.
 *
 * ```ts
 * const placeOrder = (order: Order) =>
 *   Outbox.withTransaction(Effect.gen(function*() {
 *     yield* saveOrder(order)
 *     yield* Outbox.enqueue({ topic: "orders", key: order.id, payload: OutboxMessage.jsonPayload(order) })
 *   }))
 * ```
 *
 * `enqueueAutocommit` is the named exception: each call its own transaction.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as Option from "effect/Option"
import * as Random from "effect/Random"
import { EventNotFoundError, OutboxValidationError, type StoreError } from "./Errors.ts"
import { eventIdAt } from "./internal/ids/eventId.ts"
import { InTransaction, inTransactionOnly, withTransactionOf } from "./internal/outbox/transaction.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import { currentSpanOf, withTraceparent } from "./internal/telemetry/traceContext.ts"
import * as Vars from "./internal/variables.ts"
import * as OutboxMessage from "./OutboxMessage.ts"
import { type InsertResult, OutboxStore } from "./OutboxStore.ts"
import * as PartitionLimit from "./PartitionLimit.ts"
import * as RecordSize from "./RecordSize.ts"
import * as Telemetry from "./Telemetry.ts"
import { Transactor } from "./Transactor.ts"
import * as Transition from "./Transition.ts"
import { WakeUp } from "./WakeUp.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /**
   * Largest accepted record: key, headers (with `event-id` and `traceparent`) and payload, as the
   * record batch that would carry it alone (`RecordSize.singleRecordBatchBytes`). Keep it at or
   * below the topics' `max.message.bytes`, so that every record the outbox accepts can be
   * published. Default `RecordSize.DEFAULT_MAX_MESSAGE_BYTES` (1,048,588, Kafka's default).
   */
  readonly maxRecordBytes?: number | undefined
  /**
   * @deprecated Before 0.2.0 this limited the payload alone; it is now read as `maxRecordBytes`
   * (the whole record) when that is not given.
   */
  readonly maxPayloadBytes?: number | undefined
  /**
   * Highest explicit partition a draft may name (`PartitionLimit`). Default 1023
   * (`OUTBOX_MAX_PARTITION`).
   */
  readonly maxPartition?: number | undefined
}

/**
 * The record limit `settings` resolve to.
 *
 * @since 0.1.0
 * @category config
 */
export const maxRecordBytes = (settings: Settings): number =>
  settings.maxRecordBytes ?? settings.maxPayloadBytes ?? RecordSize.DEFAULT_MAX_MESSAGE_BYTES

/**
 * `OUTBOX_MAX_RECORD_BYTES` (the older `OUTBOX_MAX_PAYLOAD_BYTES` is read when it is not set),
 * default 1,048,588: Kafka's default `max.message.bytes`, the limit the publishers split by;
 * `OUTBOX_MAX_PARTITION`, default 1023.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  maxRecordBytes: Vars.outbox.maxRecordBytes.config,
  maxPartition: PartitionLimit.config
})

export {
  /**
   * Proof that the code runs inside an outbox transaction. `enqueue` requires it and only
   * {@link withTransaction} provides it, so the compiler refuses an enqueue that would commit on
   * its own, apart from the state change it describes.
   *
   * @since 0.1.0
   * @category services
   */
  InTransaction,
  /**
   * The `withTransaction` of an `Outbox` implementation over a `Transactor`: its transaction, with
   * {@link InTransaction} provided to what runs in it.
   *
   * @since 0.1.0
   * @category constructors
   */
  withTransactionOf
}

/**
 * @since 0.1.0
 * @category services
 */
export class Outbox extends Context.Service<
  Outbox,
  {
    /**
     * Runs `effect` in one transaction of the outbox's database (the `Transactor`) and provides
     * {@link InTransaction} to it: it commits when `effect` succeeds, rolls back when it fails,
     * dies or is interrupted. Nested calls join the outer transaction.
     */
    readonly withTransaction: <A, E, R>(
      effect: Effect.Effect<A, E, R>
    ) => Effect.Effect<A, E | StoreError, Exclude<R, InTransaction>>
    /**
     * Validates and stores drafts in the ambient transaction, returning their ids in order. Bad
     * input fails with `OutboxValidationError` and writes nothing; a rolled-back transaction
     * leaves no event behind.
     */
    readonly enqueue: (
      drafts: ReadonlyArray<OutboxMessage.OutboxDraft>
    ) => Effect.Effect<ReadonlyArray<OutboxMessage.EventId>, OutboxValidationError | StoreError, InTransaction>
    /** `PREQUEUED → PENDING`. Unknown ids fail; ids no longer `PREQUEUED` are left alone. */
    readonly release: (
      ids: ReadonlyArray<OutboxMessage.EventId>
    ) => Effect.Effect<void, EventNotFoundError | StoreError>
  }
>()("@effect-outbox/core/Outbox") {}

// Kafka's own rule (kafka.common.internals.Topic): at most 249 of [a-zA-Z0-9._-], not "." or "..".
const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/

/**
 * Checks one draft; the first problem found, or `undefined`. `index` names the draft in a batch.
 *
 * @since 0.1.0
 * @category validation
 */
export const validateDraft = (
  draft: OutboxMessage.OutboxDraft,
  settings: Settings,
  index = 0
): OutboxValidationError | undefined => {
  const invalid = (field: string, reason: string) =>
    new OutboxValidationError({ field: `drafts[${index}].${field}`, reason })
  if (typeof draft.topic !== "string" || draft.topic.length === 0) return invalid("topic", "must be a non-empty string")
  if (!TOPIC.test(draft.topic) || draft.topic === "." || draft.topic === "..") {
    return invalid(
      "topic",
      `"${draft.topic}" is not a legal Kafka topic name (1-249 of a-z A-Z 0-9 . _ -, not "." or "..")`
    )
  }
  if (!(draft.payload instanceof Uint8Array)) return invalid("payload", "must be a Uint8Array")
  // A payload alone over the limit fails here; the whole record is checked once its headers are
  // final (validateRecordSize).
  const limit = maxRecordBytes(settings)
  if (draft.payload.byteLength > limit) {
    return invalid(
      "payload",
      `${draft.payload.byteLength} bytes exceeds the record limit of ${limit} (OUTBOX_MAX_RECORD_BYTES)`
    )
  }
  if (
    draft.partition !== undefined &&
    draft.partition !== null &&
    !(Number.isInteger(draft.partition) && draft.partition >= 0)
  ) {
    return invalid("partition", `${draft.partition} is not an integer >= 0`)
  }
  if (draft.partition !== undefined && draft.partition !== null) {
    const above = PartitionLimit.aboveMaximum(draft.partition, settings.maxPartition)
    if (above !== undefined) return invalid("partition", above)
  }
  if (draft.id !== undefined && !OutboxMessage.isEventId(draft.id)) {
    return invalid("id", `${String(draft.id)} is not a UUID`)
  }
  if (draft.key !== undefined && draft.key !== null && typeof draft.key !== "string")
    return invalid("key", "must be a string or null")
  // Before 9999-12-31: that time marks rows set aside behind their key's head.
  const at = draft.availableAt
  if (at !== undefined && !(Number.isFinite(at) && at < OutboxMessage.BEHIND_ITS_HEAD))
    return invalid("availableAt", "must be finite epoch millis before 9999-12-31T00:00:00Z")
  for (const [name, value] of Object.entries(draft.headers ?? {})) {
    if (typeof value !== "string") return invalid(`headers.${name}`, "header values must be strings")
  }
  const eventIdHeader = draft.headers?.[OutboxMessage.EVENT_ID_HEADER]
  if (eventIdHeader !== undefined && eventIdHeader !== draft.id) {
    return invalid(
      `headers.${OutboxMessage.EVENT_ID_HEADER}`,
      "is set by the outbox from the event id; leave it out or pass the same value as `id`"
    )
  }
  return undefined
}

/**
 * Checks that a record, with the headers it will be published with, fits the record limit: the
 * one size check of the library, so that nothing the outbox accepts is too large for the broker.
 *
 * @since 0.1.0
 * @category validation
 */
export const validateRecordSize = (
  record: RecordSize.SizedRecord,
  settings: Settings,
  index = 0
): OutboxValidationError | undefined => {
  const limit = maxRecordBytes(settings)
  return RecordSize.singleRecordBatchBytes(record) > limit
    ? new OutboxValidationError({
        field: `drafts[${index}].record`,
        reason: RecordSize.describeTooLarge(record, limit)
      })
    : undefined
}

/**
 * Drafts to the rows a store inserts: every draft validated ({@link validateDraft}, ids unique
 * in the batch), then given its id (a fresh UUIDv7 unless set), its headers (`event-id`,
 * `traceparent`) and its times, and checked against the record limit with those headers
 * ({@link validateRecordSize}). The one validation of the library: stores and the log writer
 * take what it returns as it is. `check` adds an engine's own rule per draft.
 *
 * @since 0.1.0
 * @category validation
 */
export const prepare = (
  drafts: ReadonlyArray<OutboxMessage.OutboxDraft>,
  settings: Settings,
  check?: (draft: OutboxMessage.OutboxDraft, index: number, now: number) => OutboxValidationError | undefined
): Effect.Effect<Array<OutboxMessage.NewOutboxMessage>, OutboxValidationError> =>
  // Plain code on the fiber's clock, random source and span (it runs once per enqueue; an
  // effect per id byte and per header cost more node CPU than the insert's own statement).
  Effect.withFiber((fiber) => {
    const clock = fiber.getRef(Clock.Clock)
    const random = fiber.getRef(Random.Random)
    const now = clock.currentTimeMillisUnsafe()
    const seen = new Set<string>()
    for (let index = 0; index < drafts.length; index++) {
      const draft = drafts[index]!
      const invalid = validateDraft(draft, settings, index) ?? check?.(draft, index, now)
      if (invalid !== undefined) return Effect.fail(invalid)
      if (draft.id !== undefined) {
        if (seen.has(draft.id.toLowerCase())) {
          return Effect.fail(
            new OutboxValidationError({
              field: `drafts[${index}].id`,
              reason: `${draft.id} appears twice in one batch`
            })
          )
        }
        seen.add(draft.id.toLowerCase())
      }
    }
    const span = currentSpanOf(fiber.context)
    const messages: Array<OutboxMessage.NewOutboxMessage> = []
    for (let index = 0; index < drafts.length; index++) {
      const draft = drafts[index]!
      const id = draft.id ?? (eventIdAt(clock.currentTimeMillisUnsafe(), random) as OutboxMessage.EventId)
      const headers = withTraceparent({ ...draft.headers, [OutboxMessage.EVENT_ID_HEADER]: id }, span)
      const key = draft.key ?? null
      const tooLarge = validateRecordSize({ key, headers, payload: draft.payload }, settings, index)
      if (tooLarge !== undefined) return Effect.fail(tooLarge)
      messages.push({
        id,
        topic: draft.topic,
        key,
        partition: draft.partition ?? null,
        headers,
        payload: draft.payload,
        status: draft.prequeued === true ? "PREQUEUED" : "PENDING",
        availableAt: draft.availableAt ?? now,
        createdAt: now
      })
    }
    return Effect.succeed(messages)
  })

/**
 * Builds the service from its ports and settings.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Settings) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const transactor = yield* Transactor
    const wakeUp = yield* WakeUp

    // A store that queued the wake-up with the rows (PostgreSQL's in-transaction NOTIFY) says
    // so; else the relays are woken here, once per enqueue.
    const wakeUnlessQueued = (inserted: InsertResult) => (inserted.wakeUpQueued ? Effect.void : wakeUp.notify)
    const stored = (messages: Array<OutboxMessage.NewOutboxMessage>) =>
      messages.length === 0
        ? Effect.succeed([])
        : transactor.withTransaction(Effect.flatMap(store.insert(messages), wakeUnlessQueued)).pipe(
            Effect.andThen(Metric.update(Telemetry.enqueued, messages.length)),
            Effect.map(() => messages.map((message) => message.id))
          )

    const enqueue = (drafts: ReadonlyArray<OutboxMessage.OutboxDraft>) =>
      Effect.flatMap(prepare(drafts, settings), stored).pipe(
        // No stack trace: it would only name this line, and capturing one costs node CPU on
        // every business transaction.
        runningSpan(Telemetry.spans.enqueue, { attributes: { "outbox.count": drafts.length } })
      )

    const release = (ids: ReadonlyArray<OutboxMessage.EventId>) =>
      transactor
        .withTransaction<void, EventNotFoundError | StoreError, never>(
          Effect.gen(function* () {
            const outcomes = yield* Transition.release(ids)
            const missing = outcomes.find((outcome) => outcome.current === undefined)
            if (missing !== undefined) return yield* new EventNotFoundError({ id: missing.id })
            if (outcomes.some((outcome) => outcome.outcome === "applied")) yield* wakeUp.notify
          }).pipe(Effect.provideService(OutboxStore, store))
        )
        .pipe(Effect.withSpan(Telemetry.spans.release, { attributes: { "outbox.count": ids.length } }))

    return Outbox.of({ withTransaction: withTransactionOf(transactor), enqueue, release })
  })

/**
 * The service from `config` and the `OutboxStore`, `Transactor` and `WakeUp` ports.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Outbox, Config.ConfigError, OutboxStore | Transactor | WakeUp> = Layer.effect(Outbox)(
  Effect.gen(function* () {
    return yield* make(yield* config)
  })
)

/**
 * The service with explicit settings.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (settings: Settings): Layer.Layer<Outbox, never, OutboxStore | Transactor | WakeUp> =>
  Layer.effect(Outbox)(make(settings))

/**
 * Runs `effect` in one transaction and lets it enqueue: the events it enqueues and every write of
 * yours in it (`effect/sql`'s `SqlClient` joins the same transaction) commit together, or none
 * does. Nested calls, and calls inside a `sql.withTransaction` you opened, join the outer
 * transaction. A commit that fails surfaces as `StoreError` (operation `"transaction"`).
 *
 * @since 0.1.0
 * @category transactions
 */
export const withTransaction = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | StoreError, Exclude<R, InTransaction> | Outbox> =>
  Effect.flatMap(Effect.service(Outbox), (outbox) => outbox.withTransaction(effect))

/**
 * Enqueues one draft (returns its id) or several (returns their ids, in order) in the ambient
 * transaction, so they commit with the caller's writes. It requires {@link InTransaction}:
 * run it inside {@link withTransaction}.
 *
 * @since 0.1.0
 * @category accessors
 */
export function enqueue(
  draft: OutboxMessage.OutboxDraft
): Effect.Effect<OutboxMessage.EventId, OutboxValidationError | StoreError, Outbox | InTransaction>
export function enqueue(
  drafts: ReadonlyArray<OutboxMessage.OutboxDraft>
): Effect.Effect<ReadonlyArray<OutboxMessage.EventId>, OutboxValidationError | StoreError, Outbox | InTransaction>
export function enqueue(
  input: OutboxMessage.OutboxDraft | ReadonlyArray<OutboxMessage.OutboxDraft>
): Effect.Effect<
  OutboxMessage.EventId | ReadonlyArray<OutboxMessage.EventId>,
  OutboxValidationError | StoreError,
  Outbox | InTransaction
> {
  type Ids = OutboxMessage.EventId | ReadonlyArray<OutboxMessage.EventId>
  return inTransactionOnly(
    Effect.flatMap(
      Effect.service(Outbox),
      (outbox): Effect.Effect<Ids, OutboxValidationError | StoreError, InTransaction> =>
        isDraftArray(input) ? outbox.enqueue(input) : Effect.map(outbox.enqueue([input]), (ids) => ids[0]!)
    )
  )
}

/**
 * Enqueues in a transaction of its own, committed before it returns: for an event that goes with
 * no write of yours (a notification, a replayed command). Anything that must commit with the
 * event belongs in {@link withTransaction} with {@link enqueue} instead; inside one, this call
 * joins it like `enqueue`.
 *
 * @since 0.1.0
 * @category accessors
 */
export function enqueueAutocommit(
  draft: OutboxMessage.OutboxDraft
): Effect.Effect<OutboxMessage.EventId, OutboxValidationError | StoreError, Outbox>
export function enqueueAutocommit(
  drafts: ReadonlyArray<OutboxMessage.OutboxDraft>
): Effect.Effect<ReadonlyArray<OutboxMessage.EventId>, OutboxValidationError | StoreError, Outbox>
export function enqueueAutocommit(
  input: OutboxMessage.OutboxDraft | ReadonlyArray<OutboxMessage.OutboxDraft>
): Effect.Effect<
  OutboxMessage.EventId | ReadonlyArray<OutboxMessage.EventId>,
  OutboxValidationError | StoreError,
  Outbox
> {
  return isDraftArray(input) ? withTransaction(enqueue(input)) : withTransaction(enqueue(input))
}

const isDraftArray = (
  input: OutboxMessage.OutboxDraft | ReadonlyArray<OutboxMessage.OutboxDraft>
): input is ReadonlyArray<OutboxMessage.OutboxDraft> => Array.isArray(input)

/**
 * Releases deferred (`PREQUEUED`) events to `PENDING`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const release = (
  ids: OutboxMessage.EventId | ReadonlyArray<OutboxMessage.EventId>
): Effect.Effect<void, EventNotFoundError | StoreError, Outbox> =>
  Effect.flatMap(Effect.service(Outbox), (outbox) => outbox.release(typeof ids === "string" ? [ids] : ids))

/**
 * Reads one event's current state: the one status accessor.
 *
 * @since 0.1.0
 * @category accessors
 */
export const get = (
  id: OutboxMessage.EventId
): Effect.Effect<Option.Option<OutboxMessage.OutboxMessage>, StoreError, OutboxStore> =>
  Effect.flatMap(Effect.service(OutboxStore), (store) => store.get(id))
