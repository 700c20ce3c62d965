/**
 * The operator's moves out of `FAILURE`: requeue (`→ PENDING`) and skip
 * (`→ SKIPPED`). Neither is in the ordinary lifecycle table; each is checked by its own
 * `Lifecycle` rule, needs an operator and a reason, and leaves an audit log line naming both.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { IllegalTransitionError, OutboxValidationError, type StoreError } from "../../Errors.ts"
import * as Lifecycle from "../../Lifecycle.ts"
import { BEHIND_ITS_HEAD, type EventId } from "../../OutboxMessage.ts"
import type { OutboxStore, TransitionOutcome, TransitionPatch } from "../../OutboxStore.ts"
import * as Telemetry from "../../Telemetry.ts"
import { write } from "./write.ts"

/** What the operator asks for. */
export interface OperatorRequest {
  readonly ids: ReadonlyArray<EventId>
  readonly operator: string
  readonly reason: string
}

type OperatorMove = Effect.Effect<
  ReadonlyArray<TransitionOutcome>,
  StoreError | IllegalTransitionError | OutboxValidationError,
  OutboxStore
>

export const requeue = (request: OperatorRequest & { readonly availableAt?: number }): OperatorMove =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const outcomes = yield* fromFailure(request, {
      action: "requeue",
      to: "PENDING",
      allowed: Lifecycle.canRequeue("FAILURE"),
      patch: { attempts: 0, availableAt: request.availableAt ?? now, lastError: null, lease: null },
      appliedKey: "requeued",
      otherKey: "skipped"
    })
    yield* Metric.update(Telemetry.requeued, outcomes.filter((outcome) => outcome.outcome === "applied").length)
    return outcomes
  }).pipe(Effect.withSpan(Telemetry.spans.requeue, { attributes: { "outbox.operator": request.operator } }))

export const skip = (request: OperatorRequest): OperatorMove =>
  fromFailure(request, {
    action: "skip",
    to: "SKIPPED",
    allowed: Lifecycle.canSkip("FAILURE"),
    // The reason is kept as the row's `lastError`, after the failure it ends.
    patch: { lastError: `skipped by ${request.operator}: ${request.reason}`, lease: null },
    appliedKey: "skippedIds",
    otherKey: "notSkipped"
  }).pipe(Effect.withSpan(Telemetry.spans.skip, { attributes: { "outbox.operator": request.operator } }))

/** `FAILURE → to` for the requested rows, validated and audited. */
const fromFailure = (
  request: OperatorRequest,
  move: {
    readonly action: "requeue" | "skip"
    readonly to: Lifecycle.OutboxStatus
    readonly allowed: boolean
    readonly patch: TransitionPatch
    /** The audit line's annotation names for the ids that moved and the ids that did not. */
    readonly appliedKey: string
    readonly otherKey: string
  }
): OperatorMove =>
  Effect.gen(function* () {
    // Operator input (the CLI passes it through): a typed failure the caller can report.
    if (request.operator.trim() === "") {
      return yield* new OutboxValidationError({
        field: "operator",
        reason: `${move.action} needs a non-empty operator for the audit log`
      })
    }
    if (request.reason.trim() === "") {
      return yield* new OutboxValidationError({
        field: "reason",
        reason: `${move.action} needs a non-empty reason for the audit log`
      })
    }
    if (move.patch.availableAt !== undefined && !(move.patch.availableAt < BEHIND_ITS_HEAD)) {
      return yield* new OutboxValidationError({
        field: "availableAt",
        reason: `${move.action} needs a time before 9999-12-31T00:00:00Z (that time marks rows set aside behind their key's head)`
      })
    }
    if (!move.allowed) return yield* new IllegalTransitionError({ from: ["FAILURE"], to: move.to })
    const outcomes = yield* write(request.ids.map((id) => ({ id, from: ["FAILURE"], to: move.to, patch: move.patch })))
    const applied = outcomes.filter((outcome) => outcome.outcome === "applied")
    yield* Effect.logWarning(
      `AUDIT outbox ${move.action} by ${request.operator}: ${applied.length}/${request.ids.length} FAILURE rows -> ${move.to} (${request.reason})`
    ).pipe(
      Effect.annotateLogs({
        audit: `outbox.${move.action}`,
        operator: request.operator,
        reason: request.reason,
        [move.appliedKey]: applied.map((outcome) => outcome.id).join(","),
        [move.otherKey]: outcomes
          .filter((outcome) => outcome.outcome !== "applied")
          .map((o) => `${o.id}:${o.current ?? "missing"}`)
          .join(",")
      })
    )
    return outcomes
  })
