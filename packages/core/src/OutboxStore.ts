/**
 * The storage port of the outbox table. Adapters implement it over raw rows; the logic (what a
 * transition may do, when to retry) lives once in core. Only `Transition.ts` calls the methods
 * that change a status, so every change is checked, traced, logged and counted.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { StoreError } from "./Errors.ts"
import type { OutboxStatus } from "./Lifecycle.ts"
import type { EventId, NewOutboxMessage, OutboxMessage, PublishReceipt } from "./OutboxMessage.ts"

/**
 * A claim request. The store moves up to `limit` rows from `PENDING` to `DISPATCHING`, leased
 * to `owner` for `leaseMillis` (on the store's clock, see below), and returns them ordered by `seq`.
 *
 * The per-key rule: a row is claimable only when `availableAt <= now` and every earlier
 * (`seq`) row of the same key that is not finished with publication is claimed in the same
 * batch — i.e. the store claims, per key, a contiguous prefix of its `PENDING` rows, and only
 * when no row of that key is already `DISPATCHING` (in flight elsewhere) and no earlier row of
 * that key waits in `PENDING` with `availableAt > now` (backing off). Rows with a `null` key are
 * unordered. At most `maxPerKey` rows of one key are claimed per batch. Concurrent claims by
 * several relays never hand out rows of the same key to two owners.
 *
 * "Not finished with publication" means `PENDING` or `DISPATCHING`; `PREQUEUED` rows do not
 * block their key. A `FAILURE` row blocks the younger rows (greater `seq`) of its key unless
 * `failedHead` is `"skip"` (see {@link FailedHeadPolicy}). The rule is `Lifecycle.blocksKey`.
 *
 * `now` decides availability (`availableAt <= now`) and is written as `updatedAt`. The lease
 * expiry is `leaseMillis` after the store's own clock (the database clock for PostgreSQL),
 * so relays on hosts with skewed clocks agree with stale recovery on when a lease ends.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimRequest {
  readonly owner: string
  readonly limit: number
  readonly maxPerKey: number
  readonly leaseMillis: number
  readonly now: number
  /** Default `"block"`. */
  readonly failedHead?: FailedHeadPolicy
}

/**
 * What a `FAILURE` row means for the younger rows of its key.
 *
 * - `"block"` (default): they are not claimed until an operator requeues the `FAILURE` row
 *   (`FAILURE → PENDING`) or skips it (`FAILURE → SKIPPED`): the key's order holds.
 * - `"skip"`: a `FAILURE` row does not block its key; younger rows overtake it (for streams
 *   where order matters less than progress).
 *
 * @since 0.1.0
 * @category models
 */
export type FailedHeadPolicy = "block" | "skip"

/**
 * What a transition writes besides the status. Absent fields are left as they are.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransitionPatch {
  readonly attempts?: number
  readonly availableAt?: number
  readonly lastError?: string | null
  readonly receipt?: PublishReceipt
  /** Sets a new lease (when re-leasing) or clears it (`null`). Leaving `DISPATCHING` always clears it. */
  readonly lease?: { readonly owner: string; readonly expiresAt: number } | null
  readonly publishedAt?: number
  readonly processedAt?: number
}

/**
 * One compare-and-set: move `id` to `to` when its status is one of `from` (and, when given, it is
 * still leased by `leaseOwner`). When its status is one of `acceptIfIn`, the row has already
 * advanced past `to`: the patch's `receipt` / `publishedAt` are recorded, the status is
 * left alone, and the outcome is `"already_advanced"`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransitionRequest {
  readonly id: EventId
  readonly from: ReadonlyArray<OutboxStatus>
  readonly to: OutboxStatus
  readonly acceptIfIn?: ReadonlyArray<OutboxStatus>
  readonly leaseOwner?: string
  readonly patch: TransitionPatch
  readonly now: number
}

/**
 * `current` is the row's status after the call (absent when the row does not exist).
 *
 * @since 0.1.0
 * @category models
 */
export interface TransitionOutcome {
  readonly id: EventId
  readonly outcome: "applied" | "already_advanced" | "rejected"
  readonly current: OutboxStatus | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface OutboxStats {
  readonly byStatus: { readonly [S in OutboxStatus]?: number }
  readonly oldestPendingCreatedAt: number | null
  readonly staleLeases: number
  /**
   * Keys with a `FAILURE` row: under the default `failedHead: "block"` their younger events wait
   * for an operator's requeue or skip. Absent from stores that do not count it.
   */
  readonly blockedKeys?: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ListFilter {
  readonly statuses?: ReadonlyArray<OutboxStatus>
  readonly topic?: string
  readonly ids?: ReadonlyArray<EventId>
  readonly createdBefore?: number
  /** Epoch millis: rows last updated before this (rows stuck in a status, for the reconciler). */
  readonly updatedBefore?: number
  /** Rows after this sequence number: the next page of a listing in `seq` order. */
  readonly afterSeq?: number
  readonly limit: number
}

/**
 * Where a page of {@link StaleRequest} ends: the last row of the page, in (lease expiry, `seq`)
 * order.
 *
 * @since 0.1.0
 * @category models
 */
export interface StaleCursor {
  readonly leaseExpiresAt: number
  readonly seq: number
}

/**
 * A page of expired leases: `DISPATCHING` rows whose lease expired before the store's clock,
 * in (lease expiry, `seq`) order, after `after`, at most `limit` of them — plus every other
 * expired `DISPATCHING` row of the keys in the page, wherever it sorts, so a page never splits
 * a key's rows (they come from one claim; stale recovery decides a key's rows together).
 *
 * The clock is the store's own: the database's `now()`, never the caller's host, so a
 * skewed relay or an operator's laptop cannot take a live lease for a dead one. `now` is for
 * stores without a clock of their own and for tests that drive time; production code leaves it out.
 *
 * @since 0.1.0
 * @category models
 */
export interface StaleRequest {
  readonly limit: number
  readonly after?: StaleCursor | undefined
  readonly now?: number | undefined
}

/**
 * `now` is the clock the page was judged by; `next` is where the following page starts, absent
 * when this page was the last (the caller starts over from the oldest lease).
 *
 * @since 0.1.0
 * @category models
 */
export interface StalePage {
  readonly rows: ReadonlyArray<OutboxMessage>
  readonly now: number
  readonly next: StaleCursor | undefined
}

/**
 * The answer of `acquireRecoveryLease`: who holds the stale-recovery lease now, until when.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecoveryLease {
  readonly acquired: boolean
  readonly owner: string
  readonly expiresAt: number
}

/**
 * What `insert` did besides storing the rows.
 *
 * - `wakeUpQueued`: the store queued the relays' wake-up in the same write (PostgreSQL's
 *   in-transaction mode puts the `NOTIFY` in the insert statement), so the enqueue does not call
 *   `WakeUp.notify` again. Stores without such a fold answer `false`.
 *
 * @since 0.1.0
 * @category models
 */
export interface InsertResult {
  readonly wakeUpQueued: boolean
}

/**
 * @since 0.1.0
 * @category services
 */
export class OutboxStore extends Context.Service<
  OutboxStore,
  {
    /**
     * Inserts new rows in the ambient transaction when there is one. The rows come from
     * `Outbox.prepare`, the one validation: a store checks no more than its schema enforces
     * (ids are unique). Reports whether it queued the relays' wake-up with them.
     */
    readonly insert: (messages: ReadonlyArray<NewOutboxMessage>) => Effect.Effect<InsertResult, StoreError>
    /** `PENDING → DISPATCHING` for a batch, honouring the per-key rule of {@link ClaimRequest}. */
    readonly claim: (request: ClaimRequest) => Effect.Effect<ReadonlyArray<OutboxMessage>, StoreError>
    /** Batched compare-and-set, one round trip for the whole batch. Outcomes in request order. */
    readonly transition: (
      requests: ReadonlyArray<TransitionRequest>
    ) => Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError>
    /** One page of expired leases: see {@link StaleRequest}. */
    readonly findStale: (request: StaleRequest) => Effect.Effect<StalePage, StoreError>
    /**
     * Takes (or renews, for its holder) the stale-recovery lease of this outbox table until the
     * store's clock + `ttlMillis`: one recoverer at a time. Free, expired or already `owner`'s:
     * acquired; else the current holder is reported.
     */
    readonly acquireRecoveryLease: (request: {
      readonly owner: string
      readonly ttlMillis: number
    }) => Effect.Effect<RecoveryLease, StoreError>
    /** Gives the stale-recovery lease up, when `owner` holds it (else nothing happens). */
    readonly releaseRecoveryLease: (owner: string) => Effect.Effect<void, StoreError>
    /**
     * Records that relay `owner` runs, until the store's clock + `ttlMillis` (`0`: it stopped).
     * Read back by `ReadModel.relays`. Optional: a store without it reports no relays.
     */
    readonly relayHeartbeat?:
      | ((request: { readonly owner: string; readonly ttlMillis: number }) => Effect.Effect<void, StoreError>)
      | undefined
    readonly get: (id: EventId) => Effect.Effect<Option.Option<OutboxMessage>, StoreError>
    readonly list: (filter: ListFilter) => Effect.Effect<ReadonlyArray<OutboxMessage>, StoreError>
    readonly stats: (now: number) => Effect.Effect<OutboxStats, StoreError>
    /**
     * Deletes at most `limit` rows in one of `statuses` last updated before `olderThan`; returns
     * how many. Never blocks or waits on rows being claimed.
     */
    readonly purge: (request: {
      readonly statuses: ReadonlyArray<OutboxStatus>
      readonly olderThan: number
      readonly limit: number
    }) => Effect.Effect<number, StoreError>
  }
>()("@effect-outbox/core/OutboxStore") {}
