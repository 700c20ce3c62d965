/**
 * The row repairs: `requeue` (`FAILURE → PENDING`), `skip` (`FAILURE → SKIPPED`) and `release`
 * (`PREQUEUED → PENDING`), each over an explicit selection, a dry run unless `execute`, and only
 * through core's `Transition` (audited).
 *
 * @since 0.1.0
 */
import type { StoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import type { EventId, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore, type TransitionOutcome } from "@effect-outbox/core/OutboxStore"
import * as Transition from "@effect-outbox/core/Transition"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import { OperatorError, parseId } from "./OperatorError.ts"

/**
 * Which rows a requeue or release touches. At least one filter, or `all`, is required: a bare
 * command never touches every row by accident.
 *
 * @since 0.1.0
 * @category models
 */
export interface Selection {
  readonly ids?: ReadonlyArray<string> | undefined
  readonly topic?: string | undefined
  /** Epoch millis: rows created before this. */
  readonly createdBefore?: number | undefined
  readonly all?: boolean | undefined
  readonly limit: number
}

const select = (status: OutboxStatus, selection: Selection) =>
  Effect.gen(function* () {
    const ids = selection.ids ?? []
    const filtered = ids.length > 0 || selection.topic !== undefined || selection.createdBefore !== undefined
    if (!filtered && selection.all !== true) {
      return yield* new OperatorError({
        reason: "name the rows: --id, --topic or --created-before (or --all to take every matching row)"
      })
    }
    if (!Number.isInteger(selection.limit) || selection.limit < 1) {
      return yield* new OperatorError({ reason: `--limit must be a positive integer, got ${selection.limit}` })
    }
    const eventIds = yield* Effect.forEach(ids, parseId)
    const store = yield* OutboxStore
    return yield* store.list({
      statuses: [status],
      ...(eventIds.length === 0 ? {} : { ids: eventIds }),
      ...(selection.topic === undefined ? {} : { topic: selection.topic }),
      ...(selection.createdBefore === undefined ? {} : { createdBefore: selection.createdBefore }),
      limit: selection.limit
    })
  })

/**
 * What a mutating action selected and, when executed, what each row's transition answered.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChangeReport {
  readonly action: "requeue" | "release" | "skip"
  readonly dryRun: boolean
  readonly selected: ReadonlyArray<OutboxMessage>
  readonly outcomes: ReadonlyArray<TransitionOutcome>
}

/** What an audited repair of `FAILURE` rows asks for. */
type AuditedRequest = Selection & {
  readonly operator: string
  readonly reason: string
  readonly execute: boolean
}

/** `requeue` and `skip`: the audit fields required, the rows selected, the move applied, the relays woken. */
const audited = <E>(
  action: "requeue" | "skip",
  allowed: boolean,
  move: (request: {
    readonly ids: ReadonlyArray<EventId>
    readonly operator: string
    readonly reason: string
  }) => Effect.Effect<ReadonlyArray<TransitionOutcome>, E, OutboxStore>,
  request: AuditedRequest
): Effect.Effect<ChangeReport, OperatorError | StoreError | E, OutboxStore | WakeUp> =>
  Effect.gen(function* () {
    if (request.reason.trim() === "") {
      return yield* new OperatorError({ reason: `--reason is required: the ${action} is audited` })
    }
    if (request.operator.trim() === "") {
      return yield* new OperatorError({
        reason: `--operator is required (defaults to $USER): the ${action} is audited`
      })
    }
    if (!allowed) return yield* new OperatorError({ reason: `the lifecycle forbids ${action}` })
    const selected = yield* select("FAILURE", request)
    if (!request.execute || selected.length === 0) {
      return { action, dryRun: !request.execute, selected, outcomes: [] } satisfies ChangeReport
    }
    const outcomes = yield* move({
      ids: selected.map((row) => row.id),
      operator: request.operator,
      reason: request.reason
    })
    // A requeued row is PENDING again; a skipped row's key may have events waiting: wake the relays.
    if (outcomes.some((o) => o.outcome === "applied")) yield* WakeUp.use((w) => w.notify)
    return { action, dryRun: false, selected, outcomes } satisfies ChangeReport
  })

/**
 * `FAILURE → PENDING` for the selected rows, through `Transition.requeue`: attempts reset, an
 * audit log line naming the operator and the reason. A dry run only lists the rows.
 *
 * @since 0.1.0
 * @category change
 */
export const requeue = (request: AuditedRequest) =>
  audited("requeue", Lifecycle.canRequeue("FAILURE"), Transition.requeue, request)

/**
 * `FAILURE → SKIPPED` for the selected rows, through `Transition.skip`: the operator gives up on
 * them for good, and their keys' younger events go on without them (a `FAILURE` row blocks its
 * key by default). Audited like a requeue; a dry run only lists the rows.
 *
 * @since 0.1.0
 * @category change
 */
export const skip = (request: AuditedRequest) => audited("skip", Lifecycle.canSkip("FAILURE"), Transition.skip, request)

// -- release ---------------------------------------------------------------------------------

/**
 * `PREQUEUED → PENDING` for the selected rows, through `Transition.release`, with an audit log
 * line. A dry run only lists the rows.
 *
 * @since 0.1.0
 * @category change
 */
export const release = (
  request: Selection & {
    readonly operator: string
    readonly execute: boolean
  }
): Effect.Effect<ChangeReport, OperatorError | StoreError, OutboxStore | WakeUp> =>
  Effect.gen(function* () {
    const selected = yield* select("PREQUEUED", request)
    if (!request.execute || selected.length === 0) {
      return { action: "release", dryRun: !request.execute, selected, outcomes: [] } satisfies ChangeReport
    }
    const outcomes = yield* Transition.release(selected.map((row) => row.id))
    const applied = outcomes.filter((o) => o.outcome === "applied")
    yield* Effect.logWarning(
      `AUDIT outbox release by ${request.operator}: ${applied.length}/${selected.length} PREQUEUED rows -> PENDING`
    ).pipe(
      Effect.annotateLogs({
        audit: "outbox.release",
        operator: request.operator,
        released: applied.map((o) => o.id).join(",")
      })
    )
    if (applied.length > 0) yield* WakeUp.use((w) => w.notify)
    return { action: "release", dryRun: false, selected, outcomes } satisfies ChangeReport
  })
