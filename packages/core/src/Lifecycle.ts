/**
 * The outbox lifecycle: the nine statuses, the transition table, and the compare-and-set rules
 * every status change obeys (SPEC R2). Pure and total; the one place to read the state machine.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * @since 0.1.0
 * @category models
 */
export const OutboxStatus = Schema.Literals([
  "PREQUEUED",
  "PENDING",
  "DISPATCHING",
  "PUBLISHED",
  "UNDER_PROCESSING",
  "SUCCESS",
  "PUSHED_FAILURE",
  "FAILURE",
  "SKIPPED"
])

/**
 * @since 0.1.0
 * @category models
 */
export type OutboxStatus = typeof OutboxStatus.Type

/**
 * Every status, in lifecycle order.
 *
 * @since 0.1.0
 * @category constants
 */
export const statuses: ReadonlyArray<OutboxStatus> = OutboxStatus.literals

/**
 * The ordinary transitions (R2.1–R2.5). `FAILURE → PENDING` and `FAILURE → SKIPPED` are
 * deliberately absent: leaving `FAILURE` is the operator's audited requeue ({@link canRequeue})
 * or skip ({@link canSkip}), never an ordinary move.
 *
 * - `PREQUEUED → PENDING`: deferred work released (R2.2).
 * - `PENDING → DISPATCHING`: claimed under a lease.
 * - `DISPATCHING → PUBLISHED`: the broker confirmed the record.
 * - `DISPATCHING → PENDING`: retriable failure, stale lease without a broker record, or release
 *   on shutdown.
 * - `DISPATCHING → FAILURE`: permanent error or retries exhausted (R2.3).
 * - `DISPATCHING | PUBLISHED → UNDER_PROCESSING`: a consumer may run ahead of the publisher's
 *   acknowledgement (R2.5).
 * - `UNDER_PROCESSING → SUCCESS | PUSHED_FAILURE`: consumption ended.
 *
 * @since 0.1.0
 * @category constants
 */
export const transitions: { readonly [S in OutboxStatus]: ReadonlyArray<OutboxStatus> } = {
  PREQUEUED: ["PENDING"],
  PENDING: ["DISPATCHING"],
  DISPATCHING: ["PUBLISHED", "PENDING", "FAILURE", "UNDER_PROCESSING"],
  PUBLISHED: ["UNDER_PROCESSING"],
  UNDER_PROCESSING: ["SUCCESS", "PUSHED_FAILURE"],
  SUCCESS: [],
  PUSHED_FAILURE: [],
  FAILURE: [],
  SKIPPED: []
}

/**
 * @since 0.1.0
 * @category predicates
 */
export const canTransition = (from: OutboxStatus, to: OutboxStatus): boolean => transitions[from].includes(to)

/**
 * Terminal for ordinary transitions (R2.4).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isTerminal = (status: OutboxStatus): boolean => transitions[status].length === 0

/**
 * The operator's explicit, audited way out of `FAILURE` (R2.4).
 *
 * @since 0.1.0
 * @category predicates
 */
export const canRequeue = (from: OutboxStatus): boolean => from === "FAILURE"

/**
 * The operator's explicit, audited way to give up on a `FAILURE` row for good: `FAILURE →
 * SKIPPED`. `SKIPPED` is terminal and, unlike `FAILURE`, does not block its key (issue #12): the
 * key's younger events go on without it. The record was never confirmed by the broker (it may
 * still be there if the last send timed out; the relay probes before `FAILURE`).
 *
 * @since 0.2.0
 * @category predicates
 */
export const canSkip = (from: OutboxStatus): boolean => from === "FAILURE"

/**
 * Statuses that lie beyond `status` on the lifecycle's forward path. A late compare-and-set
 * aimed at `status` finds a row already in one of these and accepts it as a no-op (R2.6):
 * processing that ran ahead of the publisher's acknowledgement is never moved backwards.
 *
 * @since 0.1.0
 * @category constants
 */
export const advancedBeyond: { readonly [S in OutboxStatus]: ReadonlyArray<OutboxStatus> } = {
  PREQUEUED: [],
  PENDING: [],
  DISPATCHING: [],
  PUBLISHED: ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"],
  UNDER_PROCESSING: ["SUCCESS", "PUSHED_FAILURE"],
  SUCCESS: [],
  PUSHED_FAILURE: [],
  FAILURE: [],
  SKIPPED: []
}
