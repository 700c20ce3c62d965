/**
 * The claim check: a payload too large for the broker (or too large to be worth sending) is
 * stored aside when it is enqueued, and the record carries a reference in its
 * `outbox-claim-check` header and an empty value. The consumer runner reads the payload back
 * before it decodes it, so the handler sees the full payload. The store is a port: adapter-pg's
 * `PgClaimCheck` keeps payloads in a table of the outbox schema, deleted with their event by
 * retention; an S3-like store implements the same two calls.
 *
 * Only `Topic.enqueue` / `enqueueAll` offload (raw drafts go through {@link offload}). Dead
 * letters and replays copy the header, so they keep resolving while the event is kept. A record
 * whose stored payload is gone is dead-lettered with a reason that says so.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ConsumerRecord } from "./ConsumerSource.ts"
import { PayloadDecodeError } from "./Errors.ts"
import { outbox as vars } from "./internal/variables.ts"
import { type EventId, makeEventId, type OutboxDraft } from "./OutboxMessage.ts"
import type { StoreError } from "./StoreError.ts"

/**
 * The header of a record whose payload is stored aside: the reference to read it by.
 *
 * @since 0.1.0
 * @category constants
 */
export const CLAIM_CHECK_HEADER = "outbox-claim-check"

/**
 * Where payloads are stored aside. `put` runs in the enqueueing transaction (a database store
 * joins it, so the payload commits with its event); `get` answers `None` for a reference it
 * does not hold (removed by retention, never written).
 *
 * @since 0.1.0
 * @category services
 */
export class ClaimCheckStore extends Context.Service<
  ClaimCheckStore,
  {
    /** Payloads larger than this many bytes are stored aside. */
    readonly thresholdBytes: number
    readonly put: (reference: EventId, payload: Uint8Array) => Effect.Effect<void, StoreError>
    readonly get: (reference: string) => Effect.Effect<Option.Option<Uint8Array>, StoreError>
  }
>()("@effect-outbox/core/ClaimCheck/ClaimCheckStore") {}

/**
 * `OUTBOX_CLAIM_CHECK_BYTES`, default 262,144 (256 KiB).
 *
 * @since 0.1.0
 * @category config
 */
export const thresholdConfig: Config.Config<number> = vars.claimCheckBytes.config

const empty = new Uint8Array(0)

/**
 * A draft whose payload is over the store's threshold, stored aside: the draft gets its event id
 * now (the reference), an empty payload and the header. Without a store in context, or under the
 * threshold, the draft as it is.
 *
 * @since 0.1.0
 * @category producing
 */
export const offload = (draft: OutboxDraft): Effect.Effect<OutboxDraft, StoreError> =>
  Effect.flatMap(Effect.serviceOption(ClaimCheckStore), (store) => {
    if (Option.isNone(store) || draft.payload.length <= store.value.thresholdBytes) return Effect.succeed(draft)
    return Effect.gen(function* () {
      const id = draft.id ?? (yield* makeEventId)
      yield* store.value.put(id, draft.payload)
      return { ...draft, id, payload: empty, headers: { ...draft.headers, [CLAIM_CHECK_HEADER]: id } }
    })
  })

/**
 * A record's payload: its value, or, with the header, the payload stored aside. A reference the
 * store does not hold (or no store in context) fails with `PayloadDecodeError` (permanent:
 * dead-lettered); a store that cannot answer fails with its `StoreError` (retried).
 *
 * @since 0.1.0
 * @category consuming
 */
export const rehydrate = (
  record: ConsumerRecord,
  store: Option.Option<ClaimCheckStore["Service"]>
): Effect.Effect<Uint8Array, PayloadDecodeError | StoreError> => {
  const reference = record.headers[CLAIM_CHECK_HEADER]
  if (reference === undefined) return Effect.succeed(record.value)
  const missing = (why: string) =>
    new PayloadDecodeError({
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      reason: `its payload was stored aside (${CLAIM_CHECK_HEADER}: ${reference}) and ${why}`
    })
  if (Option.isNone(store)) return Effect.fail(missing("no ClaimCheckStore is provided to read it"))
  return Effect.flatMap(store.value.get(reference), (payload) =>
    Option.isSome(payload)
      ? Effect.succeed(payload.value)
      : Effect.fail(missing("the store no longer holds it (removed by retention with its event?)"))
  )
}
