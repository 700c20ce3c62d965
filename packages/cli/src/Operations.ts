/**
 * The operator's actions as Effects over the library's ports (R8.1). Each mutating action is a
 * dry run unless `execute` is set, selects rows through explicit filters, and changes them only
 * through core: `Transition.requeue` (audited), `Transition.release`, `StaleRecovery.runOnce`,
 * `DeadLetter.replay`, `Retention.runOnce`. Nothing here writes SQL (R2.4).
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import type {
  BrokerAdminError,
  ConsumerSourceError,
  IllegalTransitionError,
  OutboxStoreError,
  OutboxValidationError
} from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import * as Lifecycle from "@effect-outbox/core/Lifecycle"
import { EventId, type OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { type OutboxStats, OutboxStore, type TransitionOutcome } from "@effect-outbox/core/OutboxStore"
import { ParkedStore, type ReleaseTarget } from "@effect-outbox/core/ParkedStore"
import * as Reconciler from "@effect-outbox/core/Reconciler"
import * as Retention from "@effect-outbox/core/Retention"
import * as StaleRecovery from "@effect-outbox/core/StaleRecovery"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Transition from "@effect-outbox/core/Transition"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { type HistoryEntry, type ProcessedBy, ReadModel, type TopicCounts } from "./ReadModel.ts"

/**
 * A request an operator must correct (missing filter, unknown id, bad value).
 *
 * @since 0.1.0
 * @category errors
 */
export class OperatorError extends Schema.TaggedError<OperatorError>()("OperatorError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

// -- status ----------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export interface Status {
  readonly now: number
  readonly total: number
  readonly byStatus: OutboxStats["byStatus"]
  readonly oldestPendingAgeMillis: number | null
  readonly staleLeases: number
  /**
   * Keys with a `FAILURE` row: under the relay's default `failedHead: "block"` their younger
   * events wait until the row is requeued or skipped. Counted over every topic.
   */
  readonly blockedKeys: number
  /** The most recent `FAILURE` rows, newest first by sequence. */
  readonly failures: ReadonlyArray<{
    readonly id: string
    readonly topic: string
    readonly key: string | null
    readonly attempts: number
    readonly lastError: string | null
  }>
  readonly topics: ReadonlyArray<TopicCounts & { readonly oldestPendingAgeMillis: number | null }>
  /** Present when consumer groups were asked for (`--group`): their lag on the outbox's topics. */
  readonly consumerLag?: ReadonlyArray<GroupLag>
  /**
   * Present when asked for (`--dead-letters`): per `<topic>.DLT` of the outbox's topics that
   * exists, the dead letters not yet replayed and all it holds (`DeadLetterDepth`).
   */
  readonly deadLetters?: ReadonlyArray<DeadLetterDepth.Depth>
  /**
   * Rows `UNDER_PROCESSING` not updated for `stuckAfterMillis` (at most `limit` listed, oldest
   * first): a consumer died or its bookkeeping failed. A running service's reconciler moves the
   * ones already processed to `SUCCESS`; each carries the repair for the rest (R4.4).
   */
  readonly stuckProcessing: {
    readonly stuckAfterMillis: number
    readonly rows: ReadonlyArray<{
      readonly id: string
      readonly topic: string
      readonly updatedAt: number
      readonly repair: string
    }>
  }
}

/**
 * One consumer group on one topic: records past its committed offsets, per partition and in all.
 *
 * @since 0.1.0
 * @category models
 */
export interface GroupLag {
  readonly group: string
  readonly topic: string
  readonly lag: number
  readonly partitions: ReadonlyArray<{
    readonly partition: number
    /** `null`: the group never committed here (counted from the log start). */
    readonly committed: string | null
    readonly end: string
    readonly lag: number
  }>
}

/**
 * The lag of each group on `topics`, from the broker's committed and end offsets (the
 * `outbox_consumer_lag` reading). A group that never committed on a partition is counted from the
 * log start; topics missing on the broker are left out.
 *
 * @since 0.1.0
 * @category status
 */
export const consumerLag = (options: {
  readonly groups: ReadonlyArray<string>
  readonly topics: ReadonlyArray<string>
}): Effect.Effect<ReadonlyArray<GroupLag>, BrokerAdminError, BrokerAdmin> =>
  Effect.forEach(options.groups, (group) =>
    Effect.map(Telemetry.sampleConsumerLag({ groupId: group, topics: options.topics, fromBeginning: true }), (rows) =>
      options.topics.flatMap((topic): Array<GroupLag> => {
        const partitions = rows.filter((row) => row.topic === topic)
        return partitions.length === 0
          ? []
          : [
              {
                group,
                topic,
                lag: partitions.reduce((total, row) => total + row.lag, 0),
                partitions: partitions.map((row) => ({
                  partition: row.partition,
                  committed: row.committed,
                  end: row.end,
                  lag: row.lag
                }))
              }
            ]
      })
    )
  ).pipe(Effect.map((perGroup) => perGroup.flat()))

/**
 * The dead-letter depth of each topic's dead-letter topic (`<topic>.DLT`): dead letters not yet
 * replayed, and all it holds. Dead-letter topics missing on the broker are left out.
 *
 * @since 0.1.0
 * @category status
 */
export const deadLetterDepth = (
  topics: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<DeadLetterDepth.Depth>, BrokerAdminError, BrokerAdmin> =>
  Effect.map(
    Effect.forEach(topics, (topic) => DeadLetterDepth.sample(DeadLetter.defaultTopic(topic))),
    (depths) => depths.flatMap(Option.toArray)
  )

/**
 * Counts by status (overall and per topic), the oldest pending age, stale leases and the latest
 * failures.
 *
 * @since 0.1.0
 * @category status
 */
export const status = (
  options: {
    readonly topic?: string | undefined
    readonly failures?: number | undefined
    /** Age of the last update past which an `UNDER_PROCESSING` row is listed as stuck (default 15 min). */
    readonly stuckAfterMillis?: number | undefined
  } = {}
) =>
  Effect.gen(function* () {
    const readModel = yield* ReadModel
    const store = yield* OutboxStore
    const now = Date.now()
    const all = yield* readModel.perTopic(now)
    const topics = all.filter((t) => options.topic === undefined || t.topic === options.topic)
    const byStatus: Partial<Record<OutboxStatus, number>> = {}
    let oldest: number | null = null
    let stale = 0
    for (const topic of topics) {
      for (const [s, n] of Object.entries(topic.byStatus) as Array<[OutboxStatus, number]>) {
        byStatus[s] = (byStatus[s] ?? 0) + n
      }
      if (topic.oldestPendingCreatedAt !== null) oldest = Math.min(oldest ?? Infinity, topic.oldestPendingCreatedAt)
      stale += topic.staleLeases
    }
    const recent = yield* readModel.recentFailures(options.topic, options.failures ?? 10)
    const stats = yield* store.stats(now)
    const stuckAfterMillis = options.stuckAfterMillis ?? Duration.toMillis(Reconciler.defaults.stuckAfter)
    const stuck = yield* store.list({
      statuses: ["UNDER_PROCESSING"],
      updatedBefore: now - stuckAfterMillis,
      ...(options.topic === undefined ? {} : { topic: options.topic }),
      limit: options.failures ?? 10
    })
    return {
      now,
      total: Object.values(byStatus).reduce((a, b) => a + (b ?? 0), 0),
      byStatus,
      oldestPendingAgeMillis: oldest === null ? null : Math.max(0, now - oldest),
      staleLeases: stale,
      blockedKeys: stats.blockedKeys ?? 0,
      failures: recent.map((row) => ({
        id: row.id,
        topic: row.topic,
        key: row.key,
        attempts: row.attempts,
        lastError: row.lastError
      })),
      topics: topics.map((t) => ({
        ...t,
        oldestPendingAgeMillis: t.oldestPendingCreatedAt === null ? null : Math.max(0, now - t.oldestPendingCreatedAt)
      })),
      stuckProcessing: {
        stuckAfterMillis,
        rows: stuck.map((row) => ({
          id: row.id,
          topic: row.topic,
          updatedAt: row.updatedAt,
          repair: Reconciler.repairHint(row)
        }))
      }
    } satisfies Status
  })

// -- inspect ---------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export interface Inspection {
  readonly message: OutboxMessage
  /** The payload as text when it is valid UTF-8, else base64. */
  readonly payload: { readonly encoding: "utf8" | "base64"; readonly value: string }
  readonly history: ReadonlyArray<HistoryEntry>
  readonly processedBy: ReadonlyArray<ProcessedBy>
}

const parseId = (id: string) =>
  Schema.decodeUnknownEffect(EventId)(id.trim().toLowerCase()).pipe(
    Effect.mapError(() => new OperatorError({ reason: `"${id}" is not an event id (a UUID)` }))
  )

/**
 * One event: its row (status, attempts, lease, receipt, last error), its recorded transitions
 * and the consumers that processed it.
 *
 * @since 0.1.0
 * @category inspect
 */
export const inspect = (id: string) =>
  Effect.gen(function* () {
    const eventId = yield* parseId(id)
    const store = yield* OutboxStore
    const readModel = yield* ReadModel
    const row = yield* store.get(eventId)
    if (Option.isNone(row)) return yield* new OperatorError({ reason: `no outbox event with id ${eventId}` })
    let payload: Inspection["payload"]
    try {
      payload = { encoding: "utf8", value: new TextDecoder("utf-8", { fatal: true }).decode(row.value.payload) }
    } catch {
      payload = { encoding: "base64", value: Buffer.from(row.value.payload).toString("base64") }
    }
    return {
      message: row.value,
      payload,
      history: yield* readModel.history(eventId),
      processedBy: yield* readModel.processedBy(eventId)
    } satisfies Inspection
  })

// -- selection -------------------------------------------------------------------------------

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

// -- requeue ---------------------------------------------------------------------------------

/**
 * `FAILURE → PENDING` for the selected rows, through `Transition.requeue`: attempts reset, an
 * audit log line naming the operator and the reason (R2.4). A dry run only lists the rows.
 *
 * @since 0.1.0
 * @category change
 */
export const requeue = (
  request: Selection & {
    readonly operator: string
    readonly reason: string
    readonly execute: boolean
  }
): Effect.Effect<
  ChangeReport,
  OperatorError | OutboxStoreError | IllegalTransitionError | OutboxValidationError,
  OutboxStore | WakeUp
> =>
  Effect.gen(function* () {
    if (request.reason.trim() === "") {
      return yield* new OperatorError({ reason: "--reason is required: the requeue is audited" })
    }
    if (request.operator.trim() === "") {
      return yield* new OperatorError({ reason: "--operator is required (defaults to $USER): the requeue is audited" })
    }
    if (!Lifecycle.canRequeue("FAILURE")) return yield* new OperatorError({ reason: "the lifecycle forbids requeue" })
    const selected = yield* select("FAILURE", request)
    if (!request.execute || selected.length === 0) {
      return { action: "requeue", dryRun: !request.execute, selected, outcomes: [] } satisfies ChangeReport
    }
    const outcomes = yield* Transition.requeue({
      ids: selected.map((row) => row.id),
      operator: request.operator,
      reason: request.reason
    })
    if (outcomes.some((o) => o.outcome === "applied")) yield* WakeUp.use((w) => w.notify)
    return { action: "requeue", dryRun: false, selected, outcomes } satisfies ChangeReport
  })

// -- skip ------------------------------------------------------------------------------------

/**
 * `FAILURE → SKIPPED` for the selected rows, through `Transition.skip`: the operator gives up on
 * them for good, and their keys' younger events go on without them (a `FAILURE` row blocks its
 * key by default). Audited like a requeue; a dry run only lists the rows.
 *
 * @since 0.2.0
 * @category change
 */
export const skip = (
  request: Selection & {
    readonly operator: string
    readonly reason: string
    readonly execute: boolean
  }
): Effect.Effect<
  ChangeReport,
  OperatorError | OutboxStoreError | IllegalTransitionError | OutboxValidationError,
  OutboxStore | WakeUp
> =>
  Effect.gen(function* () {
    if (request.reason.trim() === "") {
      return yield* new OperatorError({ reason: "--reason is required: the skip is audited" })
    }
    if (request.operator.trim() === "") {
      return yield* new OperatorError({ reason: "--operator is required (defaults to $USER): the skip is audited" })
    }
    if (!Lifecycle.canSkip("FAILURE")) return yield* new OperatorError({ reason: "the lifecycle forbids skip" })
    const selected = yield* select("FAILURE", request)
    if (!request.execute || selected.length === 0) {
      return { action: "skip", dryRun: !request.execute, selected, outcomes: [] } satisfies ChangeReport
    }
    const outcomes = yield* Transition.skip({
      ids: selected.map((row) => row.id),
      operator: request.operator,
      reason: request.reason
    })
    // The skipped rows' keys may have events waiting: wake the relays.
    if (outcomes.some((o) => o.outcome === "applied")) yield* WakeUp.use((w) => w.notify)
    return { action: "skip", dryRun: false, selected, outcomes } satisfies ChangeReport
  })

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
): Effect.Effect<ChangeReport, OperatorError | OutboxStoreError, OutboxStore | WakeUp> =>
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

// -- stale recovery --------------------------------------------------------------------------

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
 * Lists the `DISPATCHING` rows whose lease expired (by the database clock, M9); with `execute`,
 * runs `StaleRecovery` rounds on them (probe the broker, then mark published or requeue, R3.2),
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
      // does not stop the pages after it (review H3).
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

// -- dead letters ----------------------------------------------------------------------------

/**
 * The dead letters of a dead-letter topic, oldest first per partition.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const deadLetters = (
  topic: string,
  options: { readonly limit?: number | undefined } = {}
): Effect.Effect<ReadonlyArray<DeadLetter.DeadLetter>, ConsumerSourceError, TopicReader> =>
  TopicReader.use((reader) =>
    reader.read(topic).pipe(
      Stream.runCollect,
      Effect.map((records) =>
        records.flatMap((record) => Option.toArray(DeadLetter.parse(record))).slice(0, options.limit ?? Infinity)
      )
    )
  )

/**
 * @since 0.1.0
 * @category models
 */
export interface ReplayReport {
  readonly dryRun: boolean
  readonly selected: ReadonlyArray<DeadLetter.DeadLetter>
  readonly result: DeadLetter.ReplayResult | null
}

/**
 * Republishes the selected dead letters of `from` to their original topic (or `to`) through
 * `DeadLetter.replay` (R5.3). `eventIds` selects by event id; none selects all, which needs `all`.
 *
 * @since 0.1.0
 * @category dead letters
 */
export const replay = (request: {
  readonly from: string
  readonly eventIds: ReadonlyArray<string>
  readonly all: boolean
  readonly to?: string | undefined
  readonly execute: boolean
}) =>
  Effect.gen(function* () {
    if (request.eventIds.length === 0 && !request.all) {
      return yield* new OperatorError({ reason: "name the dead letters: --event-id (repeatable), or --all" })
    }
    const wanted = new Set(request.eventIds.map((id) => id.trim().toLowerCase()))
    const filter = (letter: DeadLetter.DeadLetter) =>
      wanted.size === 0 || (letter.eventId !== null && wanted.has(letter.eventId.toLowerCase()))
    const selected = (yield* deadLetters(request.from)).filter(filter)
    if (!request.execute || selected.length === 0) {
      return { dryRun: !request.execute, selected, result: null } satisfies ReplayReport
    }
    const result = yield* DeadLetter.replay({
      from: request.from,
      filter,
      ...(request.to === undefined ? {} : { to: request.to })
    })
    return { dryRun: false, selected, result } satisfies ReplayReport
  })

// -- purge -----------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export interface PurgeReport {
  readonly dryRun: boolean
  readonly statuses: ReadonlyArray<OutboxStatus>
  readonly olderThan: number
  /** Rows eligible (dry run) or deleted. */
  readonly rows: number
}

/**
 * Deletes finished rows last updated more than `olderThanMillis` ago, through
 * `Retention.runOnce` (bounded batches; only finished statuses are accepted). A dry run counts.
 *
 * @since 0.1.0
 * @category change
 */
export const purge = (request: {
  readonly olderThanMillis: number
  readonly statuses: ReadonlyArray<OutboxStatus>
  readonly execute: boolean
  readonly batchSize?: number | undefined
}) =>
  Effect.gen(function* () {
    const settings: Retention.Settings = {
      ...Retention.defaults,
      statuses: request.statuses,
      olderThan: Duration.millis(request.olderThanMillis),
      batchSize: request.batchSize ?? 1000,
      maxBatchesPerRound: Number.MAX_SAFE_INTEGER
    }
    const invalid = Retention.validate(settings)
    if (invalid !== undefined) return yield* new OperatorError({ reason: invalid.message })
    const olderThan = Date.now() - request.olderThanMillis
    if (!request.execute) {
      const readModel = yield* ReadModel
      const rows = yield* readModel.countPurgeable(request.statuses, olderThan)
      return { dryRun: true, statuses: request.statuses, olderThan, rows } satisfies PurgeReport
    }
    const rows = yield* Retention.runOnce(settings).pipe(
      Effect.catchTag("OutboxValidationError", (e) => Effect.fail(new OperatorError({ reason: e.message })))
    )
    return { dryRun: false, statuses: request.statuses, olderThan, rows } satisfies PurgeReport
  })

// -- parked keys (durable parking, M10) -----------------------------------------------------------

/**
 * The parked keys of a consumer group (or of every group), head first.
 *
 * @since 0.2.0
 * @category parked
 */
export const parkedList = (options: { readonly group?: string | undefined } = {}) =>
  ParkedStore.use((store) => store.list({ consumer: options.group }))

/**
 * @since 0.2.0
 * @category models
 */
export interface ParkedReleaseReport {
  readonly dryRun: boolean
  readonly target: ReleaseTarget
  /** The key's parked offsets, head first (empty: the key is not parked). */
  readonly offsets: ReadonlyArray<string>
  readonly requested: boolean
}

/**
 * Asks the consumer that owns the key's partition to release it: the member re-reads the parked
 * records by position and runs them head first, in offset order (within its
 * `parkedReleaseInterval`). The CLI has no handler to run them itself. Dry run unless `execute`.
 *
 * @since 0.2.0
 * @category parked
 */
export const parkedRelease = (options: ReleaseTarget & { readonly execute: boolean }) =>
  Effect.gen(function* () {
    const store = yield* ParkedStore
    const target: ReleaseTarget = {
      consumer: options.consumer,
      topic: options.topic,
      partition: options.partition,
      key: options.key
    }
    const parked = (yield* store.list({
      consumer: target.consumer,
      topic: target.topic,
      partition: target.partition
    })).find((k) => k.key === target.key)
    if (parked === undefined) {
      return yield* new OperatorError({
        reason: `key ${target.key} of ${target.topic}/${target.partition} is not parked for group ${target.consumer} (see: effect-outbox parked list)`
      })
    }
    if (options.execute) yield* store.requestRelease(target)
    return {
      dryRun: !options.execute,
      target,
      offsets: parked.offsets,
      requested: options.execute
    } satisfies ParkedReleaseReport
  })
