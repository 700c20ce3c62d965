/**
 * The claim and compare-and-set rules of the `OutboxStore` port, as plain functions over the rows
 * one writer sees. The in-memory store runs them inside one synchronous (atomic) section.
 *
 * @internal
 */
import type { OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { ClaimRequest, TransitionOutcome, TransitionRequest } from "@effect-outbox/core/OutboxStore"

/**
 * Chooses the rows a claim moves to `DISPATCHING` (see `ClaimRequest`). `rows` are ordered by
 * `seq`; `lockedElsewhere(row)` says another open transaction holds the row (it is skipped, and
 * because its state is unknown to us it blocks its key, the conservative reading of
 * `SKIP LOCKED`). Under `failedHead: "block"` (the default) a `FAILURE` row blocks the rows of
 * its key that come after it.
 */
export const selectClaimable = (
  rows: ReadonlyArray<OutboxMessage>,
  request: ClaimRequest,
  lockedElsewhere: (row: OutboxMessage) => boolean
): Array<OutboxMessage> => {
  const blocked = new Set<string>()
  for (const row of rows) {
    if (row.key === null) continue
    if (row.status === "DISPATCHING") blocked.add(row.key)
    else if (row.status === "PENDING" && lockedElsewhere(row)) blocked.add(row.key)
  }
  const failedHeadBlocks = (request.failedHead ?? "block") === "block"
  const perKey = new Map<string, number>()
  const chosen: Array<OutboxMessage> = []
  for (const row of rows) {
    if (chosen.length >= request.limit) break
    // Rows come in seq order: a FAILURE row blocks every later row of its key.
    if (row.status === "FAILURE" && row.key !== null && failedHeadBlocks) blocked.add(row.key)
    if (row.status !== "PENDING") continue
    const available = row.availableAt <= request.now && !lockedElsewhere(row)
    if (row.key === null) {
      if (available) chosen.push(row)
      continue
    }
    if (blocked.has(row.key)) continue
    const taken = perKey.get(row.key) ?? 0
    if (!available || taken >= request.maxPerKey) {
      // The per-key prefix ends here: later rows of this key must wait for this one.
      blocked.add(row.key)
      continue
    }
    perKey.set(row.key, taken + 1)
    chosen.push(row)
  }
  return chosen
}

/** The claimed version of a row. Attempts are left to the relay's transitions. */
export const claimed = (row: OutboxMessage, request: ClaimRequest): OutboxMessage => ({
  ...row,
  status: "DISPATCHING",
  leaseOwner: request.owner,
  leaseExpiresAt: request.now + request.leaseMillis,
  updatedAt: request.now
})

/**
 * One compare-and-set on the row as the writer sees it. Returns the outcome and the new row
 * (`undefined` when nothing is written).
 */
export const applyTransition = (
  row: OutboxMessage | undefined,
  request: TransitionRequest
): { readonly outcome: TransitionOutcome; readonly next: OutboxMessage | undefined } => {
  if (row === undefined) {
    return { outcome: { id: request.id, outcome: "rejected", current: undefined }, next: undefined }
  }
  const ownerMatches = request.leaseOwner === undefined || row.leaseOwner === request.leaseOwner
  if (request.from.includes(row.status) && ownerMatches) {
    const patch = request.patch
    let leaseOwner = row.leaseOwner
    let leaseExpiresAt = row.leaseExpiresAt
    if (patch.lease !== undefined) {
      leaseOwner = patch.lease === null ? null : patch.lease.owner
      leaseExpiresAt = patch.lease === null ? null : patch.lease.expiresAt
    }
    if (request.to !== "DISPATCHING") {
      leaseOwner = null
      leaseExpiresAt = null
    }
    const next: OutboxMessage = {
      ...row,
      status: request.to,
      attempts: patch.attempts ?? row.attempts,
      availableAt: patch.availableAt ?? row.availableAt,
      lastError: patch.lastError !== undefined ? patch.lastError : row.lastError,
      receipt: patch.receipt ?? row.receipt,
      publishedAt: patch.publishedAt ?? row.publishedAt,
      processedAt: patch.processedAt ?? row.processedAt,
      leaseOwner,
      leaseExpiresAt,
      updatedAt: request.now
    }
    return { outcome: { id: request.id, outcome: "applied", current: request.to }, next }
  }
  if (request.acceptIfIn?.includes(row.status)) {
    const { publishedAt, receipt } = request.patch
    const next: OutboxMessage | undefined =
      receipt === undefined && publishedAt === undefined
        ? undefined
        : {
            ...row,
            receipt: receipt ?? row.receipt,
            publishedAt: publishedAt ?? row.publishedAt
          }
    return { outcome: { id: request.id, outcome: "already_advanced", current: row.status }, next }
  }
  return { outcome: { id: request.id, outcome: "rejected", current: row.status }, next: undefined }
}
