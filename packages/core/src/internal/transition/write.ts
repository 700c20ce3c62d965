/**
 * The unchecked write under every transition: one batched compare-and-set through the store, with
 * a span for the batch and a metric and a debug log line per row. `Transition.apply` calls it after
 * validating the moves against the lifecycle table, the operator moves after their own check.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Metric from "effect/Metric"
import type { Mutable } from "effect/Types"
import type { StoreError } from "../../Errors.ts"
import type * as Lifecycle from "../../Lifecycle.ts"
import type { EventId } from "../../OutboxMessage.ts"
import { OutboxStore, type TransitionOutcome, type TransitionPatch, type TransitionRequest } from "../../OutboxStore.ts"
import * as Telemetry from "../../Telemetry.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"

/** A requested move: a `TransitionRequest` without `now` (taken from `Clock`). */
export interface Move {
  readonly id: EventId
  readonly from: ReadonlyArray<Lifecycle.OutboxStatus>
  readonly to: Lifecycle.OutboxStatus
  readonly acceptIfIn?: ReadonlyArray<Lifecycle.OutboxStatus>
  readonly leaseOwner?: string
  readonly patch?: TransitionPatch
}

export const write = (
  moves: ReadonlyArray<Move>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  moves.length === 0
    ? Effect.succeed([])
    : Effect.gen(function* () {
        const store = yield* OutboxStore
        const now = yield* Clock.currentTimeMillis
        const outcomes = yield* store.transition(moves.map((move) => request(move, now)))
        yield* record(moves, outcomes)
        return outcomes
      }).pipe(
        runningSpan(Telemetry.spans.transition, {
          attributes: {
            "outbox.batch_size": moves.length,
            "outbox.to": [...new Set(moves.map((m) => m.to))].join(",")
          }
        })
      )

// One object literal per row (no spreads of optional fields: this runs for every row of a mark).
const request = (move: Move, now: number): TransitionRequest => {
  const out: Mutable<TransitionRequest> = { id: move.id, from: move.from, to: move.to, patch: move.patch ?? {}, now }
  if (move.acceptIfIn !== undefined) out.acceptIfIn = move.acceptIfIn
  if (move.leaseOwner !== undefined) out.leaseOwner = move.leaseOwner
  return out
}

/**
 * The batch's metric and debug lines. One counter update per `from`/`to`/`outcome` (the same
 * totals as one per row), and the per-row lines only when Debug is enabled: two effects per row,
 * one for a line the logger drops, were most of the claim relay's node CPU per batch.
 */
const record = (moves: ReadonlyArray<Move>, outcomes: ReadonlyArray<TransitionOutcome>) =>
  Effect.gen(function* () {
    const groups = new Map<string, { from: string; to: Lifecycle.OutboxStatus; outcome: string; n: number }>()
    for (let i = 0; i < outcomes.length; i++) {
      const from = moves[i]!.from.join("|")
      const to = moves[i]!.to
      const outcome = outcomes[i]!.outcome
      const key = `${from} ${to} ${outcome}`
      const group = groups.get(key)
      if (group === undefined) groups.set(key, { from, to, outcome, n: 1 })
      else group.n++
    }
    for (const { from, n, outcome, to } of groups.values()) {
      yield* Metric.update(Metric.withAttributes(Telemetry.transitions, { from, to, outcome }), n)
    }
    // Debug: one line per row and move is too many for Info in production; raise the minimum
    // log level to Debug to follow every transition.
    if (!(yield* LogLevel.isEnabled("Debug"))) return
    for (let i = 0; i < outcomes.length; i++) yield* logLine(moves[i]!, outcomes[i]!)
  })

const logLine = (move: Move, outcome: TransitionOutcome) => {
  const from = move.from.join("|")
  const line =
    `outbox ${outcome.id}: ${from} -> ${move.to} ${outcome.outcome}` +
    (outcome.outcome === "applied" ? "" : ` (now ${outcome.current ?? "missing"})`)
  return Effect.logDebug(line).pipe(
    Effect.annotateLogs({ eventId: outcome.id, from, to: move.to, outcome: outcome.outcome })
  )
}
