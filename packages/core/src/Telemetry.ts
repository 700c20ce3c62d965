/**
 * Span, log and metric names in one place, W3C trace context in Kafka headers (R2.7, R8.2), and
 * consumer lag read from the broker (R8.1).
 *
 * The enqueueing transaction writes its span's context into the event's `traceparent` header;
 * the consumer parses it back and runs its handler as a child of that span, so one trace spans
 * the database write, the relay and the consumer.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { BrokerAdmin, type GroupOffsets } from "./BrokerAdmin.ts"
import type { BrokerAdminError } from "./Errors.ts"
import type { Headers } from "./OutboxMessage.ts"

/**
 * Span names.
 *
 * @since 0.1.0
 * @category constants
 */
export const spans = {
  enqueue: "outbox.enqueue",
  release: "outbox.release",
  claim: "outbox.claim",
  transition: "outbox.transition",
  requeue: "outbox.requeue",
  skip: "outbox.skip",
  relayBatch: "outbox.relay.batch",
  publish: "outbox.relay.publish",
  staleRecovery: "outbox.stale_recovery",
  retention: "outbox.retention"
} as const

/**
 * Counts every status change the transition helper attempted, with attributes `from`, `to` and
 * `outcome` (`applied`, `already_advanced`, `rejected`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const transitions = Metric.counter("outbox_transitions_total", {
  description: "Outbox status transitions attempted, by from/to/outcome",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const claimed = Metric.counter("outbox_claimed_total", {
  description: "Outbox rows claimed for dispatch",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const enqueued = Metric.counter("outbox_enqueued_total", {
  description: "Outbox events enqueued (counted inside the transaction, so rolled-back ones count too)",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const published = Metric.counter("outbox_published_total", {
  description: "Outbox events the broker confirmed",
  incremental: true
})

/**
 * Failed publications, with attribute `kind`: `retriable`, `permanent`, `exhausted`,
 * `unknown_partition`, `ordering` (held back behind a failed earlier record of its key).
 *
 * @since 0.1.0
 * @category metrics
 */
export const publishFailed = Metric.counter("outbox_publish_failed_total", {
  description: "Outbox publications that failed, by kind",
  incremental: true
})

/**
 * Time from the start of a batch's publish call to the broker's answer, in milliseconds.
 *
 * @since 0.1.0
 * @category metrics
 */
export const publishLatency = Metric.histogram("outbox_publish_latency_ms", {
  description: "Latency of one batched publish call in milliseconds",
  boundaries: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]
})

/**
 * Stale leases handled by recovery, with attribute `result`: `found`, `requeued`, `failed`,
 * `probe_error`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const staleRecovered = Metric.counter("outbox_stale_recovered_total", {
  description: "Stale DISPATCHING leases handled by recovery, by result",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const purged = Metric.counter("outbox_purged_total", {
  description: "Finished outbox rows removed by retention",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const requeued = Metric.counter("outbox_requeued_total", {
  description: "FAILURE rows requeued by an operator",
  incremental: true
})

/**
 * Keys with a `FAILURE` row (sampled from the store). Under the relay's default
 * `failedHead: "block"` the younger events of each such key wait until an operator requeues or
 * skips the row: alert when it stays above 0.
 *
 * @since 0.2.0
 * @category metrics
 */
export const blockedKeys = Metric.gauge("outbox_blocked_keys", {
  description: "Keys whose younger outbox events wait behind a FAILURE row (requeue or skip it)"
})

/**
 * Records of one partition a consumer group has not committed yet, with attributes `group`,
 * `topic` and `partition`: the partition's end offset minus the group's committed offset, as the
 * broker stores them (see {@link sampleConsumerLag}). It grows while a consumer is stuck on a
 * record (retrying a poison record, a slow handler) or not running, and is 0 when the group has
 * committed everything.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerLag = Metric.gauge("outbox_consumer_lag", {
  description: "Records a consumer group has not committed yet (end offset - committed offset), per partition"
})

/**
 * A partition's offsets with the group's lag on it.
 *
 * @since 0.1.0
 * @category consumer lag
 */
export interface PartitionLag extends GroupOffsets {
  readonly groupId: string
  readonly lag: number
}

/**
 * The lag of a group on one partition: records between its committed offset (or the log start,
 * when retention removed what it had not read) and the end of the log. A group that never
 * committed on the partition counts from the log start when it reads from the beginning (the
 * consumer's default), and as caught up with `fromBeginning: false` (it then starts at the end).
 *
 * @since 0.1.0
 * @category consumer lag
 */
export const lagOf = (
  offsets: GroupOffsets,
  options: { readonly fromBeginning?: boolean | undefined } = {}
): number => {
  const start = BigInt(offsets.start)
  const end = BigInt(offsets.end)
  const position =
    offsets.committed === null ? (options.fromBeginning !== false ? start : end) : BigInt(offsets.committed)
  const lag = end - (position > start ? position : start)
  return lag > 0n ? Number(lag) : 0
}

/**
 * Reads a group's committed offsets and the logs' end offsets from the broker (`BrokerAdmin`),
 * sets {@link consumerLag} for every partition of `topics`, and returns the rows (sum their
 * `lag` for the group's total).
 *
 * The committed offset is the consumer's durable position: the idempotent consumer commits after
 * each batch, only past records that finished (processed, skipped or dead-lettered). Reading it
 * from the broker rather than from a live member keeps the gauge true when the consumer is stuck
 * retrying a record (it commits nothing while the log keeps growing), crashed, or not running.
 *
 * @since 0.1.0
 * @category consumer lag
 */
export const sampleConsumerLag = (request: {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning?: boolean | undefined
}): Effect.Effect<ReadonlyArray<PartitionLag>, BrokerAdminError, BrokerAdmin> =>
  Effect.gen(function* () {
    const admin = yield* BrokerAdmin
    const offsets = yield* admin.groupOffsets({ groupId: request.groupId, topics: request.topics })
    const rows = offsets.map(
      (o): PartitionLag => ({ ...o, groupId: request.groupId, lag: lagOf(o, { fromBeginning: request.fromBeginning }) })
    )
    for (const row of rows) {
      yield* Metric.update(
        Metric.withAttributes(consumerLag, {
          group: row.groupId,
          topic: row.topic,
          partition: String(row.partition)
        }),
        row.lag
      )
    }
    return rows
  })

/**
 * The W3C trace-context header.
 *
 * @since 0.1.0
 * @category constants
 */
export const TRACEPARENT_HEADER = "traceparent"

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * Formats a span's context as a W3C `traceparent` value (`00-<trace>-<span>-<flags>`).
 *
 * @since 0.1.0
 * @category trace context
 */
export const formatTraceparent = (span: {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}): string => `00-${normalise(span.traceId, 32)}-${normalise(span.spanId, 16)}-${span.sampled ? "01" : "00"}`

// Effect's native tracer already produces hex ids of the right width; other tracers may not,
// and a malformed header is worse than a padded one.
const normalise = (id: string, width: number): string => {
  const hex = id.toLowerCase().replace(/[^0-9a-f]/g, "")
  return hex.length >= width ? hex.slice(-width) : hex.padStart(width, "0")
}

/**
 * Parses a `traceparent` value. Invalid values, version `ff` and all-zero ids are rejected, as
 * the W3C specification requires.
 *
 * @since 0.1.0
 * @category trace context
 */
export const parseTraceparent = (value: string): Option.Option<Tracer.ExternalSpan> => {
  const match = TRACEPARENT.exec(value.trim().toLowerCase())
  if (match === null) return Option.none()
  const [, version, traceId, spanId, flags] = match as unknown as [string, string, string, string, string]
  if (version === "ff" || /^0+$/.test(traceId) || /^0+$/.test(spanId)) return Option.none()
  return Option.some(Tracer.externalSpan({ traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 }))
}

/**
 * Adds the current span's `traceparent` to `headers` (unchanged when no span is active or the
 * caller already set one).
 *
 * @since 0.1.0
 * @category trace context
 */
export const injectTraceparent = (headers: Headers): Effect.Effect<Headers> =>
  TRACEPARENT_HEADER in headers
    ? Effect.succeed(headers)
    : Effect.currentSpan.pipe(
        Effect.map((span): Headers => ({ ...headers, [TRACEPARENT_HEADER]: formatTraceparent(span) })),
        Effect.catch(() => Effect.succeed(headers))
      )

/**
 * The parent span a consumer should continue from, read from a record's headers.
 *
 * @since 0.1.0
 * @category trace context
 */
export const parentFromHeaders = (headers: Headers): Option.Option<Tracer.ExternalSpan> => {
  const value = headers[TRACEPARENT_HEADER]
  return value === undefined ? Option.none() : parseTraceparent(value)
}

/**
 * Runs `effect` as a child of the trace carried in `headers`, when there is one.
 *
 * @since 0.1.0
 * @category trace context
 */
export const withParentFromHeaders =
  (headers: Headers) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Option.match(parentFromHeaders(headers), {
      onNone: () => effect,
      onSome: (parent) => Effect.withParentSpan(effect, parent)
    })

// ---------------------------------------------------------------------------------------------
// consumer metrics
// ---------------------------------------------------------------------------------------------

/**
 * Records finished by the consumer, with attribute `result`: `processed`, `already_processed`,
 * `skipped` (finished outbox row), `dead_lettered`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerRecordsTotal = Metric.counter("outbox_consumer_records_total", {
  description: "Records finished by the consumer, by result",
  incremental: true
})

/**
 * Missing `SUCCESS` transitions repaired without running the handler again (R4.4).
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerReconciledTotal = Metric.counter("outbox_consumer_reconciled_total", {
  description: "Already-processed records whose missing SUCCESS transition was reconciled",
  incremental: true
})

/**
 * Handler tries that failed and will be retried.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerRetriesTotal = Metric.counter("outbox_consumer_retries_total", {
  description: "Failed handler tries that were retried",
  incremental: true
})

/**
 * Record tries that failed on the infrastructure (database down, transaction lost) and are
 * retried without limit, outside the attempt budget (H2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerInfrastructureRetriesTotal = Metric.counter("outbox_consumer_infrastructure_retries_total", {
  description: "Record tries that failed on the infrastructure and were retried outside the attempt budget",
  incremental: true
})

/**
 * Delivered records whose local outbox row said they should not have been delivered, with
 * attribute `kind` (`failure_row_delivered`: the relay gave the row up as `FAILURE`, yet the
 * record reached Kafka — processed anyway, C2).
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerAnomaliesTotal = Metric.counter("outbox_consumer_anomalies_total", {
  description: "Delivered records whose outbox row said they should not have been delivered",
  incremental: true
})

/**
 * Records of revoked partitions dropped before their handler ran (M3): the partition's new
 * owner processes them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerRevokedRecordsTotal = Metric.counter("outbox_consumer_revoked_records_total", {
  description: "Records of revoked partitions dropped before their handler ran",
  incremental: true
})
