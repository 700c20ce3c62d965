/**
 * THE transition helper. Every status change in the library goes through this module:
 * it checks the move against the lifecycle table, writes it as one batched compare-and-set
 * (`OutboxStore.transition`) or one claim (`OutboxStore.claim`), and records one span per call
 * (a call moves a whole batch of rows) plus a debug log line and a metric count per row moved.
 * Nothing else calls the store's `claim` or `transition`.
 *
 * The convenience operations below are the only moves the library makes; {@link apply} is the
 * checked escape hatch for anything else.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { IllegalTransitionError, type StoreError } from "./Errors.ts"
import { runningSpan } from "./internal/telemetry/runningSpan.ts"
import { type Move, write } from "./internal/transition/write.ts"
import * as Lifecycle from "./Lifecycle.ts"
import { BEHIND_ITS_HEAD, type EventId, type OutboxMessage, type PublishReceipt } from "./OutboxMessage.ts"
import { type FailedHeadPolicy, OutboxStore, type TransitionOutcome } from "./OutboxStore.ts"
import * as Telemetry from "./Telemetry.ts"

export type {
  /**
   * A requested move: a {@link OutboxStore.TransitionRequest} without `now` (taken from `Clock`).
   *
   * @since 0.1.0
   * @category models
   */
  Move
} from "./internal/transition/write.ts"

/**
 * Checks a move against the lifecycle table: every `from` must be allowed to reach `to`, and
 * `acceptIfIn` may only name statuses that lie beyond `to`. Requeue out of `FAILURE` is
 * not an ordinary move: use {@link requeue}.
 *
 * @since 0.1.0
 * @category validation
 */
export const validate = (move: Move): IllegalTransitionError | undefined => {
  const legal =
    move.from.length > 0 &&
    move.from.every((from) => Lifecycle.canTransition(from, move.to)) &&
    (move.acceptIfIn ?? []).every((status) => Lifecycle.advancedBeyond[move.to].includes(status))
  return legal ? undefined : new IllegalTransitionError({ from: move.from, to: move.to })
}

/**
 * Applies a batch of checked moves in one store call. Fails with `IllegalTransitionError`
 * before writing anything when any move is illegal. Outcomes come back in request order.
 *
 * @since 0.1.0
 * @category transitions
 */
export const apply = (
  moves: ReadonlyArray<Move>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError | IllegalTransitionError, OutboxStore> =>
  Effect.gen(function* () {
    for (const move of moves) {
      const illegal = validate(move)
      if (illegal !== undefined) return yield* illegal
    }
    return yield* write(moves)
  })

// The convenience moves are legal by construction; a violation is a bug in this file.
const applyKnown = (moves: ReadonlyArray<Move>) =>
  apply(moves).pipe(Effect.catchTag("IllegalTransitionError", (error) => Effect.die(error)))

/**
 * `PENDING → DISPATCHING` for a batch under a lease, honouring the store's per-key rule
 * (see `OutboxStore.ClaimRequest`). Rows come back ordered by `seq`.
 *
 * @since 0.1.0
 * @category transitions
 */
export const claim = (options: {
  readonly owner: string
  readonly limit: number
  readonly maxPerKey: number
  readonly leaseMillis: number
  readonly failedHead?: FailedHeadPolicy
}): Effect.Effect<ReadonlyArray<OutboxMessage>, StoreError, OutboxStore> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const now = yield* Clock.currentTimeMillis
    const rows = yield* store.claim({ ...options, now })
    if (rows.length > 0) {
      yield* Metric.update(
        Metric.withAttributes(Telemetry.transitions, { from: "PENDING", to: "DISPATCHING", outcome: "applied" }),
        rows.length
      )
      yield* Metric.update(Telemetry.claimed, rows.length)
      yield* Effect.logDebug(`outbox claimed ${rows.length} rows for ${options.owner}`).pipe(
        Effect.annotateLogs({ owner: options.owner, ids: rows.map((row) => row.id).join(",") })
      )
    }
    return rows
  }).pipe(runningSpan(Telemetry.spans.claim, { attributes: { "outbox.owner": options.owner } }))

/**
 * A broker receipt for a dispatched row.
 *
 * @since 0.1.0
 * @category models
 */
export interface Published {
  readonly id: EventId
  readonly receipt: PublishReceipt
}

/**
 * `DISPATCHING → PUBLISHED` with the receipt, as one compare-and-set for the batch.
 * Rows that processing already advanced (`UNDER_PROCESSING`, `SUCCESS`, `PUSHED_FAILURE`) get
 * the receipt recorded and keep their status (`already_advanced`).
 *
 * No lease-owner condition: the receipt proves the record is on the broker, whichever relay
 * holds the lease now; a relay still sending it will find the row `PUBLISHED` and stop.
 *
 * @since 0.1.0
 * @category transitions
 */
export const markPublished = (
  items: ReadonlyArray<Published>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => applyKnown(items.map((item) => publishedMove(item, now))))

const publishedMove = (item: Published, now: number): Move => ({
  id: item.id,
  from: ["DISPATCHING"],
  to: "PUBLISHED",
  acceptIfIn: Lifecycle.advancedBeyond.PUBLISHED,
  patch: { receipt: item.receipt, publishedAt: now, lease: null, lastError: null }
})

/**
 * A failed publication. `retryAt` set: back to `PENDING` (available again then); `null`:
 * `FAILURE` with `reason`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PublishFailure {
  readonly id: EventId
  /** The lease owner that dispatched it: a relay that lost its lease changes nothing. */
  readonly owner: string
  readonly reason: string
  /** The attempts count to store (the caller's `attempts + 1`). */
  readonly attempts: number
  readonly retryAt: number | null
}

/**
 * `DISPATCHING → PENDING` (retry) or `DISPATCHING → FAILURE`, conditional on the row still being
 * `DISPATCHING` under `owner`.
 *
 * @since 0.1.0
 * @category transitions
 */
export const markPublishFailed = (
  items: ReadonlyArray<PublishFailure>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> => applyKnown(items.map(publishFailedMove))

const publishFailedMove = (item: PublishFailure): Move =>
  item.retryAt === null
    ? {
        id: item.id,
        from: ["DISPATCHING"],
        to: "FAILURE",
        leaseOwner: item.owner,
        patch: { attempts: item.attempts, lastError: item.reason, lease: null }
      }
    : {
        id: item.id,
        from: ["DISPATCHING"],
        to: "PENDING",
        leaseOwner: item.owner,
        patch: { attempts: item.attempts, availableAt: item.retryAt, lastError: item.reason, lease: null }
      }

/**
 * Gives claimed rows back to `PENDING` unchanged (no attempt counted): graceful shutdown, or a
 * row held back because an earlier row of its key failed in the same batch.
 *
 * @since 0.1.0
 * @category transitions
 */
export const releaseClaimed = (
  items: ReadonlyArray<Released>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> => applyKnown(items.map(releasedMove))

/**
 * A claimed row handed back unchanged.
 *
 * @since 0.1.0
 * @category models
 */
export interface Released {
  readonly id: EventId
  readonly owner: string
  readonly reason?: string
}

const releasedMove = (item: Released): Move => ({
  id: item.id,
  from: ["DISPATCHING"],
  to: "PENDING",
  leaseOwner: item.owner,
  patch: { lease: null, ...(item.reason === undefined ? {} : { lastError: item.reason }) }
})

/**
 * Settles a dispatched batch in ONE store call: receipts ({@link markPublished}), failures
 * ({@link markPublishFailed}) and rows handed back ({@link releaseClaimed}), in that order.
 *
 * @since 0.1.0
 * @category transitions
 */
export const settle = (batch: {
  readonly published: ReadonlyArray<Published>
  readonly failed: ReadonlyArray<PublishFailure>
  readonly released: ReadonlyArray<Released>
}): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    applyKnown([
      ...batch.published.map((item) => publishedMove(item, now)),
      ...batch.failed.map(publishFailedMove),
      ...batch.released.map(releasedMove)
    ])
  )

/**
 * `PREQUEUED → PENDING`: deferred work released. An `availableAt` at or after `BEHIND_ITS_HEAD`
 * (9999-12-31) is taken as one just before it: that time marks rows set aside behind their key's
 * head.
 *
 * @since 0.1.0
 * @category transitions
 */
export const release = (
  ids: ReadonlyArray<EventId>,
  options?: { readonly availableAt?: number }
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  applyKnown(
    ids.map((id) => ({
      id,
      from: ["PREQUEUED"],
      to: "PENDING",
      patch:
        options?.availableAt === undefined ? {} : { availableAt: Math.min(options.availableAt, BEHIND_ITS_HEAD - 1) }
    }))
  )

/**
 * Stale recovery found no broker record: `DISPATCHING → PENDING`, conditional on the expired
 * lease still being `staleOwner`'s (a row re-claimed meanwhile is left alone).
 *
 * @since 0.1.0
 * @category transitions
 */
export const requeueStale = (
  items: ReadonlyArray<{ readonly id: EventId; readonly staleOwner: string; readonly reason?: string | undefined }>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  applyKnown(
    items.map((item) => ({
      id: item.id,
      from: ["DISPATCHING"],
      to: "PENDING",
      leaseOwner: item.staleOwner,
      patch: { lease: null, lastError: item.reason ?? `lease of ${item.staleOwner} expired; no broker record found` }
    }))
  )

/**
 * A stale row the probe found on the broker.
 *
 * @since 0.1.0
 * @category models
 */
export interface FoundStale extends Published {
  /** The expired lease the recovery judged. */
  readonly staleOwner: string
}

/**
 * Stale recovery found the record on the broker: `DISPATCHING → PUBLISHED` with its receipt,
 * conditional on the lease it judged still holding the row (a row requeued and re-claimed
 * meanwhile is another dispatch, left to its relay). Rows already advanced beyond `PUBLISHED`
 * get the receipt recorded.
 *
 * @since 0.1.0
 * @category transitions
 */
export const markFoundStale = (
  items: ReadonlyArray<FoundStale>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    applyKnown(items.map((item) => ({ ...publishedMove(item, now), leaseOwner: item.staleOwner })))
  )

/**
 * Stale recovery (or the relay) gives up on a row: `DISPATCHING → FAILURE` with `reason`,
 * conditional on `owner` still holding it.
 *
 * @since 0.1.0
 * @category transitions
 */
export const failDispatching = (
  items: ReadonlyArray<{ readonly id: EventId; readonly owner: string; readonly reason: string }>
): Effect.Effect<ReadonlyArray<TransitionOutcome>, StoreError, OutboxStore> =>
  applyKnown(
    items.map((item) => ({
      id: item.id,
      from: ["DISPATCHING"],
      to: "FAILURE",
      leaseOwner: item.owner,
      patch: { lastError: item.reason, lease: null }
    }))
  )

/**
 * Consumption starts: `DISPATCHING | PUBLISHED → UNDER_PROCESSING`. A row already
 * `SUCCESS` / `PUSHED_FAILURE` answers `already_advanced` (skip the work); any other status
 * answers `rejected` with `current`.
 *
 * @since 0.1.0
 * @category transitions
 */
export const startProcessing = (id: EventId): Effect.Effect<TransitionOutcome, StoreError, OutboxStore> =>
  Effect.map(
    applyKnown([
      {
        id,
        from: ["DISPATCHING", "PUBLISHED"],
        to: "UNDER_PROCESSING",
        acceptIfIn: Lifecycle.advancedBeyond.UNDER_PROCESSING,
        patch: { lease: null }
      }
    ]),
    (outcomes) => outcomes[0]!
  )

/**
 * Consumption ends: `UNDER_PROCESSING → SUCCESS | PUSHED_FAILURE`. A row that already ended
 * answers `rejected` with its `current` status, never moved.
 *
 * @since 0.1.0
 * @category transitions
 */
export const finishProcessing = (
  id: EventId,
  result: "SUCCESS" | "PUSHED_FAILURE",
  options?: { readonly reason?: string }
): Effect.Effect<TransitionOutcome, StoreError, OutboxStore> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.map(
      applyKnown([
        {
          id,
          from: ["UNDER_PROCESSING"],
          to: result,
          patch: { processedAt: now, ...(options?.reason === undefined ? {} : { lastError: options.reason }) }
        }
      ]),
      (outcomes) => outcomes[0]!
    )
  )

export {
  /**
   * An operator's requeue out of `FAILURE`: `FAILURE → PENDING` with attempts reset,
   * checked by `Lifecycle.canRequeue` and recorded as an audit log line naming the operator and
   * the reason. Never part of the ordinary table. An empty operator or reason fails with
   * `OutboxValidationError`, before anything is written.
   *
   * @since 0.1.0
   * @category operator
   */
  requeue,
  /**
   * An operator's skip: `FAILURE → SKIPPED`, checked by `Lifecycle.canSkip` and
   * recorded as an audit log line naming the operator and the reason. A `FAILURE` row blocks the
   * younger rows of its key (the relay's default `failedHead: "block"`); a `SKIPPED` one does not,
   * so the key goes on without it. The reason is kept as the row's `lastError`, after the failure.
   * An empty operator or reason fails with `OutboxValidationError`.
   *
   * @since 0.1.0
   * @category operator
   */
  skip
} from "./internal/transition/operator.ts"
