/**
 * The operator's read model (port): what the CLI and the dashboard read beyond `OutboxStore` —
 * counts per topic, an event's recorded transitions and the consumers that processed it, the
 * latest failures, and how many rows a purge would remove. Read-only by construction: every
 * change goes through `Transition`. A storage adapter implements it over its own
 * tables (`PgReadModel` in `@effect-outbox/adapter-pg`), so no SQL lives outside the adapter.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { StoreError } from "./Errors.ts"
import type { OutboxStatus } from "./Lifecycle.ts"

/**
 * One topic's rows: counts per status, the oldest `PENDING` row, and the `DISPATCHING` rows whose
 * lease expired (by the store's clock).
 *
 * @since 0.1.0
 * @category models
 */
export interface TopicCounts {
  readonly topic: string
  readonly byStatus: { readonly [S in OutboxStatus]?: number }
  readonly oldestPendingCreatedAt: number | null
  readonly staleLeases: number
}

/**
 * One recorded status change (kept when the store records transitions).
 *
 * @since 0.1.0
 * @category models
 */
export interface HistoryEntry {
  readonly from: OutboxStatus
  readonly to: OutboxStatus
  readonly leaseOwner: string | null
  readonly at: number
}

/**
 * A consumer group that processed the event under its event-id identity (`Inbox.eventIdentity`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ProcessedBy {
  readonly consumer: string
  readonly identity: string
  readonly processedAt: number
}

/**
 * A `FAILURE` row, without its payload.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecentFailure {
  readonly id: string
  readonly topic: string
  readonly key: string | null
  readonly attempts: number
  readonly lastError: string | null
  readonly updatedAt: number
}

/**
 * A relay's last heartbeat.
 *
 * @since 0.1.0
 * @category models
 */
export interface RelayHeartbeat {
  readonly owner: string
  /** Epoch millis: when the heartbeat lapses (the store's clock). */
  readonly expiresAt: number
  /** Not yet lapsed, by the store's clock. */
  readonly alive: boolean
}

/**
 * @since 0.1.0
 * @category services
 */
export class ReadModel extends Context.Service<
  ReadModel,
  {
    /** Counts of every topic with rows, by topic. */
    readonly perTopic: Effect.Effect<ReadonlyArray<TopicCounts>, StoreError>
    /** The event's recorded transitions, oldest first (empty when transitions are not recorded). */
    readonly history: (id: string) => Effect.Effect<ReadonlyArray<HistoryEntry>, StoreError>
    /** The consumer groups that processed the event, first first. */
    readonly processedBy: (id: string) => Effect.Effect<ReadonlyArray<ProcessedBy>, StoreError>
    /** The latest `FAILURE` rows (newest first by sequence), of one topic or all. */
    readonly recentFailures: (
      topic: string | undefined,
      limit: number
    ) => Effect.Effect<ReadonlyArray<RecentFailure>, StoreError>
    /**
     * The relays' heartbeats (`OutboxStore.relayHeartbeat`), latest first; absent from stores
     * that keep none.
     */
    readonly relays?: Effect.Effect<ReadonlyArray<RelayHeartbeat>, StoreError> | undefined
    /** How many rows `OutboxStore.purge` would delete: one of `statuses`, last updated before `olderThan`. */
    readonly countPurgeable: (
      statuses: ReadonlyArray<OutboxStatus>,
      olderThan: number
    ) => Effect.Effect<number, StoreError>
  }
>()("@effect-outbox/core/ReadModel") {}
