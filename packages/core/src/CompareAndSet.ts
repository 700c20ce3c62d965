/**
 * The compare-and-set every `OutboxStore.transition` performs, as one pure decision over the row
 * a writer sees: `"applied"` when the row is in one of `from` (and still leased by
 * `leaseOwner`, when given), `"already_advanced"` when it is already in one of `acceptIfIn` (the
 * receipt is recorded, the status left alone), `"rejected"` otherwise. Leaving `DISPATCHING`
 * clears the lease ({@link Lifecycle.holdsLease}).
 *
 * The in-memory store runs this function; a SQL store re-states it in SQL and the
 * `OutboxStoreSuite` holds both to the same cases.
 *
 * @since 0.1.0
 */
import * as Lifecycle from "./Lifecycle.ts"
import type { OutboxMessage } from "./OutboxMessage.ts"
import type { TransitionOutcome, TransitionRequest } from "./OutboxStore.ts"

/**
 * The outcome, and the row to write (`undefined`: nothing is written).
 *
 * @since 0.1.0
 * @category models
 */
export interface Decision {
  readonly outcome: TransitionOutcome
  readonly next: OutboxMessage | undefined
}

/**
 * Decides one compare-and-set on `row` (`undefined`: the row does not exist).
 *
 * @since 0.1.0
 * @category decisions
 */
export const decide = (row: OutboxMessage | undefined, request: TransitionRequest): Decision => {
  if (row === undefined) {
    return { outcome: { id: request.id, outcome: "rejected", current: undefined }, next: undefined }
  }
  const ownerMatches = request.leaseOwner === undefined || row.leaseOwner === request.leaseOwner
  if (request.from.includes(row.status) && ownerMatches) {
    return { outcome: { id: request.id, outcome: "applied", current: request.to }, next: applied(row, request) }
  }
  if (request.acceptIfIn?.includes(row.status)) {
    const { publishedAt, receipt } = request.patch
    const next: OutboxMessage | undefined =
      receipt === undefined && publishedAt === undefined
        ? undefined
        : { ...row, receipt: receipt ?? row.receipt, publishedAt: publishedAt ?? row.publishedAt }
    return { outcome: { id: request.id, outcome: "already_advanced", current: row.status }, next }
  }
  return { outcome: { id: request.id, outcome: "rejected", current: row.status }, next: undefined }
}

// The row after an applied move: the patch over the row, the lease kept only towards DISPATCHING.
const applied = (row: OutboxMessage, request: TransitionRequest): OutboxMessage => {
  const patch = request.patch
  const lease = !Lifecycle.holdsLease(request.to)
    ? null
    : patch.lease === undefined
      ? { owner: row.leaseOwner, expiresAt: row.leaseExpiresAt }
      : patch.lease
  return {
    ...row,
    status: request.to,
    attempts: patch.attempts ?? row.attempts,
    availableAt: patch.availableAt ?? row.availableAt,
    lastError: patch.lastError !== undefined ? patch.lastError : row.lastError,
    receipt: patch.receipt ?? row.receipt,
    publishedAt: patch.publishedAt ?? row.publishedAt,
    processedAt: patch.processedAt ?? row.processedAt,
    leaseOwner: lease === null ? null : lease.owner,
    leaseExpiresAt: lease === null ? null : lease.expiresAt,
    updatedAt: request.now
  }
}
