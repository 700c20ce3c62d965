/**
 * The log relay's quarantine: where an event the broker refuses for good (its topic is missing,
 * its partition does not exist) or that the log flags invalid is moved aside, so every other key
 * flows. The log has no row to park an event in, so the relay copies it out before it confirms
 * past it. While a key has an unresolved event there, the key's later events on that topic are
 * set aside behind it (`HELD`), keeping the key's order; an operator's `retry` publishes them all
 * again, in log order, and `skip` drops the refused one and lets its followers go.
 *
 * Every status change goes through {@link canTransition}.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type { LogSourceError } from "./Errors.ts"
import type { LogMessage } from "./LogRecord.ts"
import type { EventId } from "./OutboxMessage.ts"

/**
 * - `QUARANTINED`: refused by the broker for good, or invalid; waits for an operator.
 * - `HELD`: a later event of a quarantined event's topic and key, set aside to keep their order.
 * - `RETRYING`: an operator asked to publish it again; the relay does, in log order.
 * - `RETRIED`: published after a retry (or released after a skip).
 * - `SKIPPED`: an operator dropped it; never published.
 *
 * @since 0.1.0
 * @category models
 */
export type QuarantineStatus = "QUARANTINED" | "HELD" | "RETRYING" | "RETRIED" | "SKIPPED"

/**
 * @since 0.1.0
 * @category models
 */
export const statuses: ReadonlyArray<QuarantineStatus> = ["QUARANTINED", "HELD", "RETRYING", "RETRIED", "SKIPPED"]

/**
 * Statuses that hold back a key's later events.
 *
 * @since 0.1.0
 * @category models
 */
export const unresolved: ReadonlyArray<QuarantineStatus> = ["QUARANTINED", "HELD", "RETRYING"]

const allowed: Record<QuarantineStatus, ReadonlyArray<QuarantineStatus>> = {
  // An operator retries or skips it.
  QUARANTINED: ["RETRYING", "SKIPPED"],
  // Retried with its key, or released once the event before it is skipped; when the relay
  // publishes its key's released group it is published, or refused in its turn.
  HELD: ["RETRYING", "RETRIED", "QUARANTINED"],
  // Published; refused again (back to the operator); or waiting again behind one refused again.
  RETRYING: ["RETRIED", "QUARANTINED", "HELD"],
  RETRIED: [],
  SKIPPED: []
}

/**
 * Whether an event in the quarantine may move from `from` to `to`.
 *
 * @since 0.1.0
 * @category transitions
 */
export const canTransition = (from: QuarantineStatus, to: QuarantineStatus): boolean => allowed[from].includes(to)

/**
 * An event the relay moves aside: `position` is the end of the window it came in (log order).
 *
 * @since 0.1.0
 * @category models
 */
export interface QuarantineEntry {
  readonly message: LogMessage
  readonly position: string
  readonly status: "QUARANTINED" | "HELD"
  readonly reason: string
}

/**
 * A topic and key whose later events wait (`key` null: nothing waits behind it).
 *
 * @since 0.1.0
 * @category models
 */
export interface BlockedKey {
  readonly topic: string
  readonly key: string
}

/**
 * The store the relay uses, on the log's lease (`LogLease.quarantine`).
 *
 * @since 0.1.0
 * @category models
 */
export interface LogQuarantine {
  /** Topics and keys with an unresolved event in the quarantine. */
  readonly blocked: Effect.Effect<ReadonlyArray<BlockedKey>, LogSourceError>
  /** Moves events aside, in log order; an event already there is left as it is. */
  readonly put: (entries: ReadonlyArray<QuarantineEntry>) => Effect.Effect<void, LogSourceError>
  /**
   * Events to publish again, one group per topic and key in log order: the key's `RETRYING` and
   * `HELD` events, for keys with a `RETRYING` one and none `QUARANTINED`. Invalid events never.
   */
  readonly released: Effect.Effect<ReadonlyArray<ReadonlyArray<LogMessage>>, LogSourceError>
  /**
   * The relay's outcome for a released group: `published` → `RETRIED`; `refused` → `QUARANTINED`
   * with its reason, and `behind` (the group's events after it) → `HELD`.
   */
  readonly settle: (outcome: {
    readonly published: ReadonlyArray<EventId>
    readonly refused?: { readonly id: EventId; readonly reason: string } | undefined
    readonly behind: ReadonlyArray<EventId>
  }) => Effect.Effect<void, LogSourceError>
}
