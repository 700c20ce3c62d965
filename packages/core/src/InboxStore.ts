/**
 * The storage port of the processed-message records behind `Inbox.processOnce`.
 *
 * A record is kept by the **time of its event** ({@link recordTime}): the same message always
 * has the same time, so a store can keep its records in spans of time and forget a whole span at
 * once. What a store still remembers is its deduplication window: a key whose time is older than
 * the oldest span it keeps is `"expired"` — the store cannot tell whether it was handled before.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { StoreError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProcessedKey {
  /** The consumer (group) that did the work. */
  readonly consumer: string
  /** `event:<event-id>` or `offset:<topic>/<partition>/<offset>` (see `Inbox`). */
  readonly identity: string
  /**
   * The time of the message's event (epoch millis): where the record is kept, and what the
   * deduplication window is compared with. Absent: the time in a UUIDv7 `event:` identity, else
   * the time the record is written ({@link recordTime}).
   */
  readonly eventTime?: number | undefined
}

/**
 * What recording a key did: `"recorded"` (new), `"duplicate"` (a record exists) or `"expired"`
 * (the key's time is older than what the store still remembers: nothing was written).
 *
 * @since 0.1.0
 * @category models
 */
export type RecordOutcome = "recorded" | "duplicate" | "expired"

const UUID_V7 = /^event:([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i

/**
 * The time a UUIDv7 `event:` identity carries (its first 48 bits), or `undefined`.
 *
 * @since 0.1.0
 * @category identities
 */
export const identityTime = (identity: string): number | undefined => {
  const match = UUID_V7.exec(identity)
  return match === null ? undefined : Number.parseInt(match[1]! + match[2]!, 16)
}

/**
 * The time a key carries: its `eventTime`, else the time of its UUIDv7 identity; `undefined` for a
 * timeless key (a hand-made identity without a time).
 *
 * @since 0.1.0
 * @category identities
 */
export const keyTime = (key: ProcessedKey): number | undefined => {
  const at = key.eventTime ?? identityTime(key.identity)
  return at === undefined ? undefined : Math.trunc(at)
}

/**
 * The time a key is kept by: {@link keyTime}, else (a timeless key) `now`. A key with a time meets
 * its earlier records at that time; a timeless key is looked up at every time a store keeps, is
 * remembered for the retention after it was recorded, and is never `"expired"`.
 *
 * @since 0.1.0
 * @category identities
 */
export const recordTime = (key: ProcessedKey, now: number): number => keyTime(key) ?? Math.trunc(now)

/**
 * @since 0.1.0
 * @category services
 */
export class InboxStore extends Context.Service<
  InboxStore,
  {
    /**
     * Inserts the processed-message record in the ambient transaction. `"duplicate"` when a record
     * with this key exists at its time (a timeless key: at any time), a committed one or one of a
     * concurrent transaction that then commits; `"expired"` when the key's time is older than what
     * the store remembers (nothing written); any other failure is an error. Never reports
     * `"duplicate"` for anything but a key conflict.
     */
    readonly record: (key: ProcessedKey, now: number) => Effect.Effect<RecordOutcome, StoreError>
    /**
     * `record` for many keys at once, in the ambient transaction, as one statement: one outcome per
     * key, in the order of `keys`. A key that appears twice in `keys` is `"recorded"` the first time
     * and `"duplicate"` after. Same conflict and window rules as `record`; empty `keys` record
     * nothing.
     */
    readonly recordBatch: (
      keys: ReadonlyArray<ProcessedKey>,
      now: number
    ) => Effect.Effect<ReadonlyArray<RecordOutcome>, StoreError>
    /** Whether a committed record with this consumer and identity exists (at any time). */
    readonly exists: (key: ProcessedKey) => Effect.Effect<boolean, StoreError>
    /**
     * Forgets whole spans of records whose every time is older than `olderThan`, and from then on
     * answers `"expired"` for keys older than the oldest span kept; returns how many records went.
     * Never deletes a record of a span it keeps. `limit` bounds the records forgotten per call for
     * a store that deletes them one by one; one that drops whole spans may forget more.
     */
    readonly purge: (olderThan: number, limit: number) => Effect.Effect<number, StoreError>
    /** The oldest record time the store still remembers (epoch millis; `-Infinity`: all). */
    readonly horizon: Effect.Effect<number, StoreError>
  }
>()("@effect-outbox/core/InboxStore") {}
