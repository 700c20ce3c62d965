/**
 * The claim every `OutboxStore.claim` performs (the per-key rule of `ClaimRequest`), as one pure
 * decision over the rows a writer sees: which `PENDING` rows move to `DISPATCHING`, and what a
 * claimed row looks like. It is the first rule of the outbox, beside the compare-and-set of
 * every transition (`CompareAndSet`); which statuses hold back a key is `Lifecycle.blocksKey`.
 *
 * The in-memory store runs these functions inside one atomic section; a SQL store re-states them
 * in SQL and the `OutboxStoreSuite` holds both to the same cases.
 *
 * @since 0.1.0
 */
import * as Lifecycle from "./Lifecycle.ts"
import type { OutboxMessage } from "./OutboxMessage.ts"
import type { ClaimRequest } from "./OutboxStore.ts"

/**
 * Chooses the rows a claim moves to `DISPATCHING` (see `ClaimRequest`), in `seq` order. `rows`
 * are ordered by `seq`; `lockedElsewhere(row)` says another open transaction holds the row (it is
 * skipped, and because its state is unknown to this writer it blocks its key: the conservative
 * reading of `SKIP LOCKED`). Under `failedHead: "block"` (the default) a `FAILURE` row blocks
 * the rows of its key that come after it.
 *
 * @since 0.1.0
 * @category decisions
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
  const perKey = new Map<string, number>()
  const chosen: Array<OutboxMessage> = []
  for (const row of rows) {
    if (chosen.length >= request.limit) break
    if (row.status !== "PENDING") {
      // Rows come in seq order: a row that blocks its key (a FAILURE head, under the default
      // failedHead "block") holds back every later row of it.
      if (row.key !== null && Lifecycle.blocksKey(row.status, request.failedHead)) blocked.add(row.key)
      continue
    }
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

/**
 * The claimed version of a row: leased to the claim's owner until `now + leaseMillis`. Attempts
 * are left to the relay's transitions.
 *
 * @since 0.1.0
 * @category decisions
 */
export const claimed = (row: OutboxMessage, request: ClaimRequest): OutboxMessage => ({
  ...row,
  status: "DISPATCHING",
  leaseOwner: request.owner,
  leaseExpiresAt: request.now + request.leaseMillis,
  updatedAt: request.now
})
