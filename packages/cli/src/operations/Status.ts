/**
 * `status`: counts by status and topic, the oldest pending age, stale leases, stuck rows, the
 * latest failures; with a broker, consumer lag and dead-letter depth.
 *
 * @since 0.1.0
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as DeadLetterDepth from "@effect-outbox/core/DeadLetterDepth"
import type { BrokerAdminError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { type OutboxStats, OutboxStore } from "@effect-outbox/core/OutboxStore"
import { ReadModel, type RelayHeartbeat, type TopicCounts } from "@effect-outbox/core/ReadModel"
import * as Reconciler from "@effect-outbox/core/Reconciler"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

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
  /** The relays' heartbeats, latest first (absent when the store keeps none). */
  readonly relays?: ReadonlyArray<RelayHeartbeat>
  /** The most recent `FAILURE` rows, newest first by sequence. */
  readonly failures: ReadonlyArray<{
    readonly id: string
    readonly topic: string
    readonly key: string | null
    readonly attempts: number
    readonly lastError: string | null
  }>
  readonly topics: ReadonlyArray<TopicCounts & { readonly oldestPendingAgeMillis: number | null }>
  /** Present when the broker was asked (`--group`, `--dead-letters`) and did not answer: why. */
  readonly brokerError?: string
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
   * ones already processed to `SUCCESS`; each carries the repair for the rest.
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
    const now = yield* Clock.currentTimeMillis
    const all = yield* readModel.perTopic
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
    const relays = readModel.relays === undefined ? undefined : yield* readModel.relays
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
      ...(relays === undefined ? {} : { relays }),
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
