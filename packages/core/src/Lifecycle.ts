/**
 * The outbox lifecycle: the nine statuses, the transition table, and every rule over statuses:
 * what a late compare-and-set accepts, what holds a lease, blocks a key, counts as
 * unfinished, may be purged, and what the consumer does with a row. Pure and total; the one place
 * to read the state machine. The compare-and-set decision itself is `CompareAndSet.ts`; SQL
 * drivers derive their status lists from here.
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
 * The ordinary transitions: `PREQUEUED → PENDING` releases deferred work;
 * `PENDING → DISPATCHING` is a claim under a lease; `DISPATCHING → PUBLISHED` the broker's
 * confirmation, `→ PENDING` a retry, stale lease or shutdown release, `→ FAILURE` a permanent
 * error or exhausted retries; a consumer may run ahead of the acknowledgement
 * (`DISPATCHING | PUBLISHED → UNDER_PROCESSING`), and ends in `SUCCESS | PUSHED_FAILURE`.
 * Leaving `FAILURE` is never an ordinary move: it is the operator's audited requeue or skip.
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
 * Terminal for ordinary transitions.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isTerminal = (status: OutboxStatus): boolean => transitions[status].length === 0

/**
 * The operator's explicit, audited way out of `FAILURE`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const canRequeue = (from: OutboxStatus): boolean => from === "FAILURE"

/**
 * The operator's explicit, audited way to give up on a `FAILURE` row for good: `FAILURE →
 * SKIPPED`, terminal and, unlike `FAILURE`, not blocking its key.
 *
 * @since 0.1.0
 * @category predicates
 */
export const canSkip = (from: OutboxStatus): boolean => from === "FAILURE"

/**
 * Statuses beyond `status` on the forward path: a late compare-and-set aimed at `status` accepts
 * a row already there as a no-op, so processing that ran ahead is never moved back.
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

/**
 * Only `DISPATCHING` rows hold a lease: every move to another status clears it.
 *
 * @since 0.1.0
 * @category predicates
 */
export const holdsLease = (status: OutboxStatus): boolean => status === "DISPATCHING"

/**
 * Not finished with publication: the relay's working statuses. `PREQUEUED` is not queued yet.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isQueued = (status: OutboxStatus): boolean => status === "PENDING" || status === "DISPATCHING"

/**
 * Whether a row in `status` holds back the younger rows of its key: a queued row (they
 * are claimed only with or after it), and a `FAILURE` row unless the relay's `failedHead` is
 * `"skip"`. `PREQUEUED` and `SKIPPED` rows never block.
 *
 * @since 0.1.0
 * @category predicates
 */
export const blocksKey = (status: OutboxStatus, failedHead: "block" | "skip" = "block"): boolean =>
  isQueued(status) || (status === "FAILURE" && failedHead === "block")

/**
 * Committed, not yet finished by the consumer that drives the lifecycle (the end-to-end lag).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isUnfinished = (status: OutboxStatus): boolean => status !== "PREQUEUED" && !isTerminal(status)

/**
 * What retention may delete: a terminal status, or `PUBLISHED` (its record is on the broker).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isPurgeable = (status: OutboxStatus): boolean => isTerminal(status) || status === "PUBLISHED"

/**
 * What the consumer does with a record whose row is in `status`: `"skip"` finished
 * work (`SUCCESS`; `PUSHED_FAILURE` unless replayed: a replay is processed, its terminal row not
 * moved); `"start"`: move the row `UNDER_PROCESSING`, then process; `"processFailed"`: a
 * `FAILURE` row whose record landed anyway: process and report, the row stays; `"process"`:
 * process, leaving the row as it is.
 *
 * @since 0.1.0
 * @category predicates
 */
export const consumerAction = (
  status: OutboxStatus,
  isReplay: boolean
): "skip" | "start" | "processFailed" | "process" => {
  if (status === "SUCCESS" || (status === "PUSHED_FAILURE" && !isReplay)) return "skip"
  if (status === "FAILURE" && !isReplay) return "processFailed"
  return canTransition(status, "UNDER_PROCESSING") || status === "UNDER_PROCESSING" ? "start" : "process"
}
