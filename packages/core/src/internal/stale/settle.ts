/**
 * Stale recovery's moves for a round: each row's fate from its verdict, and the ordering rule
 * shared with the relay (`KeyOrder`): per key, in creation order, the first row that is requeued
 * or left decides the fate of the later ones, so a key's published rows always form a prefix of
 * its creation order.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as KeyOrder from "../../KeyOrder.ts"
import type { OutboxMessage, PublishReceipt } from "../../OutboxMessage.ts"
import type * as Transition from "../../Transition.ts"
import type { Verdict } from "./judge.ts"

// One row's fate, decided from its verdict or, behind an earlier row of its key, from that one's.
type Fate =
  | { readonly _tag: "publish"; readonly receipt: PublishReceipt }
  | { readonly _tag: "requeue"; readonly reason?: string }
  | { readonly _tag: "fail"; readonly reason: string }
  | { readonly _tag: "leave" }

const fate = (row: OutboxMessage, verdict: Verdict, now: number, giveUpMillis: number): Fate => {
  switch (verdict._tag) {
    case "found":
      return { _tag: "publish", receipt: verdict.receipt }
    case "absent":
      return { _tag: "requeue" }
    case "unknown_partition":
      // A failed row no longer blocks its key: the later rows are judged on their own.
      return verdict.retry ? { _tag: "requeue" } : { _tag: "fail", reason: verdict.reason }
    case "error": {
      const expiredFor = now - (row.leaseExpiresAt ?? now)
      if (expiredFor <= giveUpMillis) return { _tag: "leave" }
      return {
        _tag: "requeue",
        reason:
          `lease of ${row.leaseOwner ?? ""} expired ${Math.round(expiredFor / 1000)} s ago and the broker could not be ` +
          `probed (${verdict.reason}); requeued without a verdict, a duplicate is possible`
      }
    }
  }
}

/**
 * Sorts a round's rows into the moves to make. Per key, in creation order (`KeyOrder`), the first
 * row that is requeued or left decides the fate of the later ones (requeued without a reason, or
 * left too).
 */
export const settle = (
  stale: ReadonlyArray<OutboxMessage>,
  verdicts: ReadonlyArray<Verdict>,
  now: number,
  giveUpAfter: Duration.Duration
) => {
  const published: Array<Transition.FoundStale> = []
  const requeue: Array<{ id: OutboxMessage["id"]; staleOwner: string; reason?: string }> = []
  const failed: Array<{ id: OutboxMessage["id"]; owner: string; reason: string }> = []
  let left = 0
  let gaveUpAttempted = 0
  const giveUpMillis = Duration.toMillis(giveUpAfter)
  const holds = (f: Fate) => f._tag === "requeue" || f._tag === "leave"
  for (const step of KeyOrder.walk(stale, (row, i) => fate(row, verdicts[i]!, now, giveUpMillis), holds)) {
    const staleOwner = step.row.leaseOwner ?? ""
    const id = step.row.id
    const f: Fate = step._tag === "held" && step.decision._tag === "requeue" ? { _tag: "requeue" } : step.decision
    switch (f._tag) {
      case "publish":
        published.push({ id, receipt: f.receipt, staleOwner })
        break
      case "requeue":
        if (f.reason === undefined) requeue.push({ id, staleOwner })
        else {
          gaveUpAttempted++
          requeue.push({ id, staleOwner, reason: f.reason })
        }
        break
      case "fail":
        failed.push({ id, owner: staleOwner, reason: f.reason })
        break
      case "leave":
        left++
    }
  }
  return { published, requeue, failed, left, gaveUpAttempted }
}
