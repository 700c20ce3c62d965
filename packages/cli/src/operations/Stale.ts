/**
 * `recover-stale`: the `DISPATCHING` rows whose lease expired, and their recovery through core's
 * `StaleRecovery`.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import type { OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import * as Effect from "effect/Effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface StaleReport {
  readonly dryRun: boolean
  readonly stale: ReadonlyArray<OutboxMessage>
  readonly result: StaleRecovery.RoundResult | null
}

/**
 * Lists the `DISPATCHING` rows whose lease expired (by the database clock); with `execute`,
 * runs `StaleRecovery` rounds on them (probe the broker, then mark published or requeue),
 * paging through every expired lease once, under the recovery lease: while a relay's recovery
 * holds it, nothing is changed and `heldBy` names the holder.
 *
 * @since 0.1.0
 * @category change
 */
export const recoverStale = (request: { readonly limit: number }) =>
  Effect.gen(function* () {
    const { stale } = yield* listStale(request)
    if (stale.length === 0) return { dryRun: false, stale, result: null } satisfies StaleReport
    const owner = `cli-recover-stale-${randomUUID()}`
    const result = yield* Effect.gen(function* () {
      let total = yield* StaleRecovery.runOnce({ batchSize: request.limit, owner })
      // Page on (each page once) while there is more; a page of rows that cannot be probed
      // does not stop the pages after it.
      while (total.heldBy === undefined && total.next !== undefined) {
        const page = yield* StaleRecovery.runOnce(
          { batchSize: request.limit, owner },
          { after: total.next, startOver: false }
        )
        if (page.stale === 0) break
        total = {
          ...page,
          stale: total.stale + page.stale,
          found: total.found + page.found,
          requeued: total.requeued + page.requeued,
          gaveUp: total.gaveUp + page.gaveUp,
          failed: total.failed + page.failed,
          left: total.left + page.left,
          skipped: total.skipped + page.skipped
        }
      }
      return total
    }).pipe(Effect.ensuring(StaleRecovery.release(owner)))
    return { dryRun: false, stale, result } satisfies StaleReport
  })

/**
 * The dry run of {@link recoverStale}: the expired leases, nothing changed, no broker needed.
 *
 * @since 0.1.0
 * @category change
 */
export const listStale = (request: { readonly limit: number }) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const { rows: stale } = yield* store.findStale({ limit: request.limit })
    return { dryRun: true, stale, result: null } satisfies StaleReport
  })
