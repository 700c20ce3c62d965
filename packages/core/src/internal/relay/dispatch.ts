/**
 * One claimed batch from send to mark: rule 2 (one destination per key), one publish call, rule
 * 3 (walk in `seq` order and hold the rest of a key back after its first failure, `KeyOrder`),
 * the fate of each failed row, the probe before `FAILURE`, and one batched store call.
 *
 * @internal
 */

import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import type { StoreError } from "../../Errors.ts"
import * as KeyOrder from "../../KeyOrder.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import type { OutboxStore } from "../../OutboxStore.ts"
import type { Publisher, PublishOutcome } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import type * as Transition from "../../Transition.ts"
import { classify, type FailureSettings, type GiveUp, probeBeforeFailure } from "./failure.ts"
import type { Marks } from "./marks.ts"
import type { Outage } from "./outage.ts"
import { isUnavailable, publish, splitByDestination } from "./publish.ts"

export interface DispatchSettings extends FailureSettings {
  readonly publishTimeout: Duration.Duration
}

export interface DispatchContext {
  readonly owner: string
  readonly settings: DispatchSettings
  readonly outage: Outage
  readonly marks: Marks
  readonly at: (point: "afterPublish" | "afterMark", rows: ReadonlyArray<OutboxMessage>) => Effect.Effect<void>
}

export interface Counts {
  readonly claimed: number
  readonly published: number
  readonly retried: number
  readonly failed: number
  readonly heldBack: number
}

// The outcome of a batch, gathered before its one store call.
interface Settlement {
  readonly published: Array<Transition.Published>
  readonly failures: Array<Transition.PublishFailure>
  readonly heldBack: Array<Transition.Released>
  readonly giveUp: Array<GiveUp>
  retried: number
  failed: number
}

export const dispatch = (
  ctx: DispatchContext,
  rows: ReadonlyArray<OutboxMessage>,
  lease: string
): Effect.Effect<Counts, StoreError, OutboxStore | Publisher> =>
  Effect.gen(function* () {
    const { notSent, send } = splitByDestination(rows)
    const outcomes = yield* publish(send, ctx.settings.publishTimeout)
    yield* ctx.at("afterPublish", rows)
    const now = yield* Clock.currentTimeMillis
    const outageRetryAt = yield* ctx.outage.note(send, outcomes, now)

    const settlement: Settlement = {
      published: [],
      failures: [],
      heldBack: notSent.map((row) => ({
        id: row.id,
        owner: lease,
        reason: "held back: an earlier row of its key goes to another destination"
      })),
      giveUp: [],
      retried: 0,
      failed: 0
    }
    yield* sort(ctx, settlement, send, outcomes, lease, now, outageRetryAt)
    // Before FAILURE, ask the broker: a record that landed is PUBLISHED, not FAILURE. A
    // retriable failure is given up only when the broker says the record is absent: a probe
    // that fails means the broker is unreachable, which is an outage.
    const verdicts = yield* probeBeforeFailure(ctx.owner, settlement.giveUp)
    const latest = Math.max(now, ...outageRetryAt.values())
    const waitUntil = verdicts.some((v) => v._tag === "unreachable")
      ? latest > now
        ? latest
        : yield* ctx.outage.enter(now, "probing before FAILURE failed")
      : now
    for (const verdict of verdicts) {
      if (verdict._tag === "found") settlement.published.push(verdict.published)
      else if (verdict._tag === "unreachable") {
        settlement.failures.push({ ...verdict.failure, retryAt: waitUntil })
        settlement.retried++
      } else {
        settlement.failures.push(verdict.failure)
        settlement.failed++
      }
    }

    // One batched store call for the whole batch's outcome (shared with batches marked beside it).
    const { failures, heldBack, published } = settlement
    yield* ctx.marks.settle({ published, failed: failures, released: heldBack })
    yield* ctx.at("afterMark", rows)
    yield* count(settlement, send.filter((_, i) => isUnavailable(outcomes[i]!)).length)
    return {
      claimed: rows.length,
      published: published.length,
      retried: settlement.retried,
      failed: settlement.failed,
      heldBack: heldBack.length
    }
  })

// Rule 3: walk in seq order; after a key's first failure, hold its later rows back.
const sort = (
  ctx: DispatchContext,
  settlement: Settlement,
  send: ReadonlyArray<OutboxMessage>,
  outcomes: ReadonlyArray<PublishOutcome>,
  lease: string,
  now: number,
  outageRetryAt: ReadonlyMap<string, number>
) =>
  Effect.gen(function* () {
    for (const step of KeyOrder.walk(send, (_, i) => outcomes[i]!, Result.isFailure)) {
      const { decision: outcome, row } = step
      if (step._tag === "held") {
        const reason = `held back behind failed row ${step.behind.id} of key ${row.key}`
        settlement.heldBack.push({ id: row.id, owner: lease, reason })
      } else if (Result.isSuccess(outcome)) {
        settlement.published.push({ id: row.id, receipt: outcome.success })
      } else {
        const failure = yield* classify(
          ctx.settings,
          row,
          outcome.failure,
          now,
          lease,
          outageRetryAt.get(row.id) ?? now
        )
        if (failure.retryAt === null) {
          settlement.giveUp.push({ row, failure, retriable: outcome.failure.kind === "transient" })
        } else {
          settlement.failures.push(failure)
          settlement.retried++
        }
      }
    }
  })

const count = (settlement: Settlement, unavailable: number) =>
  Effect.gen(function* () {
    const failed = (kind: string, n: number) =>
      n > 0 ? Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind }), n) : Effect.void
    yield* Metric.update(Telemetry.published, settlement.published.length)
    yield* failed("unavailable", unavailable)
    yield* failed("retriable", settlement.retried - unavailable)
    yield* failed("permanent", settlement.failed)
    yield* failed("ordering", settlement.heldBack.length)
  })
