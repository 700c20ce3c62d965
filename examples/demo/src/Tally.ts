/**
 * What the demo counts, per engine. On the claim engine each event's outbox row carries its
 * progress (published, processed, dead-lettered). The log engine has no rows: the demo counts
 * what the events left behind instead, the invoices billing wrote (each with its event id) and
 * the records on the dead-letter topic.
 *
 * @since 0.1.0
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { OutboxStats, OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"

/**
 * @since 0.1.0
 * @category models
 */
export interface Counts {
  /** Events past the broker. On the log engine: the ones consumed (processed or dead-lettered). */
  readonly published: number
  readonly processed: number
  readonly deadLettered: number
  /** The claim relay gave up on these (`FAILURE`); the log relay never gives up. */
  readonly publishFailed: number
  /** Events committed and not finished yet. */
  readonly unfinished: number
}

const unfinishedStatuses = ["PREQUEUED", "PENDING", "DISPATCHING", "PUBLISHED", "UNDER_PROCESSING"] as const
const pastBroker = ["PUBLISHED", "UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"] as const

/**
 * Rows with one of `statuses`.
 *
 * @since 0.1.0
 * @category counting
 */
export const sum = (stats: OutboxStats, statuses: ReadonlyArray<keyof OutboxStats["byStatus"]>) =>
  statuses.reduce((total, status) => total + (stats.byStatus[status] ?? 0), 0)

/**
 * The claim engine: the outbox rows' statuses.
 *
 * @since 0.1.0
 * @category counting
 */
export const claim = (store: OutboxStore["Service"]) =>
  Effect.map(
    Effect.suspend(() => store.stats(Date.now())),
    (stats): Counts => ({
      published: sum(stats, pastBroker),
      processed: stats.byStatus.SUCCESS ?? 0,
      deadLettered: stats.byStatus.PUSHED_FAILURE ?? 0,
      publishFailed: stats.byStatus.FAILURE ?? 0,
      unfinished: sum(stats, unfinishedStatuses)
    })
  )

/**
 * The event ids billing invoiced.
 *
 * @since 0.1.0
 * @category counting
 */
export const invoicedEvents = (sql: SqlClient.SqlClient, schema: string) =>
  Effect.map(
    sql.unsafe<{ event_id: string }>(`SELECT DISTINCT event_id FROM "${schema}".invoices`),
    (rows) => new Set(rows.map((row) => row.event_id))
  )

/**
 * The log engine: invoices, and records on the dead-letter topic (from its offsets: only the
 * poison records land there in the demo). `committed` is the number of events committed so far.
 *
 * @since 0.1.0
 * @category counting
 */
export const log = (options: {
  readonly sql: SqlClient.SqlClient
  readonly admin: BrokerAdmin["Service"]
  readonly schema: string
  readonly deadLetterTopic: string
  readonly committed: () => ReadonlyArray<EventId>
}) =>
  Effect.gen(function* () {
    const invoiced = yield* invoicedEvents(options.sql, options.schema)
    const offsets = yield* options.admin.groupOffsets({
      groupId: "effect-outbox-demo-tally",
      topics: [options.deadLetterTopic]
    })
    const deadLettered = offsets.reduce((n, row) => n + Number(BigInt(row.end) - BigInt(row.start)), 0)
    const processed = options.committed().filter((id) => invoiced.has(id)).length
    return {
      published: processed + deadLettered,
      processed,
      deadLettered,
      publishFailed: 0,
      unfinished: Math.max(0, options.committed().length - processed - deadLettered)
    } satisfies Counts
  })

/**
 * What `Demo` needs to know of the outbox: how far the events are.
 *
 * @since 0.1.0
 * @category models
 */
export type Tally = Effect.Effect<Counts, unknown>
