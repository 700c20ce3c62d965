/**
 * The storage port of the processed-message records behind `Inbox.processOnce`.
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
}

/**
 * @since 0.1.0
 * @category services
 */
export class InboxStore extends Context.Service<
  InboxStore,
  {
    /**
     * Inserts the processed-message record in the ambient transaction. `"duplicate"` when a record
     * with this key exists (a committed one, or one of a concurrent transaction that then commits);
     * any other failure is an error. Never reports `"duplicate"` for anything but a key conflict.
     */
    readonly record: (key: ProcessedKey, now: number) => Effect.Effect<"recorded" | "duplicate", StoreError>
    /**
     * `record` for many keys at once, in the ambient transaction, as one statement: one outcome per
     * key, in the order of `keys`. A key that appears twice in `keys` is `"recorded"` the first time
     * and `"duplicate"` after. Same conflict rules as `record`; empty `keys` record nothing.
     */
    readonly recordBatch: (
      keys: ReadonlyArray<ProcessedKey>,
      now: number
    ) => Effect.Effect<ReadonlyArray<"recorded" | "duplicate">, StoreError>
    /** Whether a committed record with this key exists. */
    readonly exists: (key: ProcessedKey) => Effect.Effect<boolean, StoreError>
    /** Deletes at most `limit` records older than `olderThan`; returns how many. */
    readonly purge: (olderThan: number, limit: number) => Effect.Effect<number, StoreError>
  }
>()("@effect-outbox/core/InboxStore") {}
