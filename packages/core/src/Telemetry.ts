/**
 * Every span name and core metric of the library in one place, under one name each (the modules
 * that update a metric import it from here rather than export it again), with the helpers that
 * fill the broker-side ones: W3C trace context in Kafka headers and consumer lag read from the
 * broker.
 *
 * The enqueueing transaction writes its span's context into the event's `traceparent` header;
 * the consumer parses it back and runs its handler as a child of that span, so one trace spans
 * the database write, the relay and the consumer.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { BrokerAdmin } from "./BrokerAdmin.ts"
import type { BrokerAdminError } from "./Errors.ts"
import * as ConsumerLag from "./internal/telemetry/consumerLag.ts"

/**
 * Span names.
 *
 * Spans on the running paths take no stack trace (`captureStackTrace: false`, docs/telemetry.md).
 *
 * @since 0.1.0
 * @category constants
 */
export const spans = {
  enqueue: "outbox.enqueue",
  release: "outbox.release",
  claim: "outbox.claim",
  /** One batched compare-and-set, whatever its size. */
  transition: "outbox.transition",
  requeue: "outbox.requeue",
  skip: "outbox.skip",
  relayBatch: "outbox.relay.batch",
  publish: "outbox.relay.publish",
  /** One per published event, in the event's own trace (`TracedPublisher`). */
  publishEvent: "outbox.publish",
  staleRecovery: "outbox.stale_recovery",
  retention: "outbox.retention",
  inboxRetention: "outbox.retention.inbox",
  reconcile: "outbox.reconcile",
  inboxProcessOnce: "outbox.inbox.process_once",
  inboxProcessBatch: "outbox.inbox.process_batch",
  consumerRecord: "outbox.consumer.record",
  consumerHandler: "outbox.consumer.handler",
  consumerParkedRelease: "outbox.consumer.parked_release",
  deadLetterReplay: "outbox.dead_letter.replay",
  deadLettersAdvance: "outbox.deadLetters.advance",
  partitionAssign: "outbox.partition_assignment.assign",
  transactionalBatch: "outbox.eos.batch"
} as const

// Counters only go up (`incremental`); gauges are set to a sampled value.
const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })
const gauge = (name: string, description: string) => Metric.gauge(name, { description })

/**
 * Counts every status change the transition helper attempted, with attributes `from`, `to` and
 * `outcome` (`applied`, `already_advanced`, `rejected`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const transitions = counter(
  "outbox_transitions_total",
  "Outbox status transitions attempted, by from/to/outcome"
)

/**
 * @since 0.1.0
 * @category metrics
 */
export const claimed = counter("outbox_claimed_total", "Outbox rows claimed for dispatch")

/**
 * @since 0.1.0
 * @category metrics
 */
export const enqueued = counter(
  "outbox_enqueued_total",
  "Outbox events enqueued (counted inside the transaction, so rolled-back ones count too)"
)

/**
 * @since 0.1.0
 * @category metrics
 */
export const published = counter("outbox_published_total", "Outbox events the broker confirmed")

/**
 * Failed publications, with attribute `kind`: `retriable`, `permanent`, `exhausted`,
 * `unknown_partition`, `ordering` (held back behind a failed earlier record of its key).
 *
 * @since 0.1.0
 * @category metrics
 */
export const publishFailed = counter("outbox_publish_failed_total", "Outbox publications that failed, by kind")

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
export const staleRecovered = counter(
  "outbox_stale_recovered_total",
  "Stale DISPATCHING leases handled by recovery, by result"
)

/**
 * @since 0.1.0
 * @category metrics
 */
export const purged = counter("outbox_purged_total", "Finished outbox rows removed by retention")

/**
 * @since 0.1.0
 * @category metrics
 */
export const requeued = counter("outbox_requeued_total", "FAILURE rows requeued by an operator")

/**
 * Keys with a `FAILURE` row (sampled from the store). Under the relay's default
 * `failedHead: "block"` the younger events of each such key wait until an operator requeues or
 * skips the row: alert when it stays above 0.
 *
 * @since 0.1.0
 * @category metrics
 */
export const blockedKeys = gauge(
  "outbox_blocked_keys",
  "Keys whose younger outbox events wait behind a FAILURE row (requeue or skip it)"
)

/**
 * Records of one partition a consumer group has not committed yet, with attributes `group`,
 * `topic` and `partition` (see {@link sampleConsumerLag}). It grows while a consumer is stuck on
 * a record (a poison record retrying, a slow handler) or not running; 0 when all is committed.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerLag = gauge(
  "outbox_consumer_lag",
  "Records a consumer group has not committed yet (end offset - committed offset), per partition"
)

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
export const consumerRecordsTotal = counter(
  "outbox_consumer_records_total",
  "Records finished by the consumer, by result"
)

/**
 * Missing `SUCCESS` transitions repaired without running the handler again.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerReconciledTotal = counter(
  "outbox_consumer_reconciled_total",
  "Already-processed records whose missing SUCCESS transition was reconciled"
)

/**
 * Handler tries that failed and will be retried.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerRetriesTotal = counter("outbox_consumer_retries_total", "Failed handler tries that were retried")

/**
 * Record tries that failed on the infrastructure (database down, transaction lost) and are
 * retried without limit, outside the attempt budget.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerInfrastructureRetriesTotal = counter(
  "outbox_consumer_infrastructure_retries_total",
  "Record tries that failed on the infrastructure and were retried outside the attempt budget"
)

/**
 * Delivered records whose local outbox row said they should not have been delivered, with
 * attribute `kind` (`failure_row_delivered`: the relay gave the row up as `FAILURE`, yet the
 * record reached Kafka — processed anyway).
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerAnomaliesTotal = counter(
  "outbox_consumer_anomalies_total",
  "Delivered records whose outbox row said they should not have been delivered"
)

/**
 * Age of the oldest durably parked record per `group` and `topic` (docs/consumer.md, parking).
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerParkedOldestAge = gauge("outbox_consumer_parked_oldest_age_seconds", "Oldest parked record's age")

/**
 * Records of revoked partitions dropped before their handler ran: the partition's new
 * owner processes them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerRevokedRecordsTotal = counter(
  "outbox_consumer_revoked_records_total",
  "Records of revoked partitions dropped before their handler ran"
)

// ---------------------------------------------------------------------------------------------
// metrics of the outbox rows (sampled from the store by `OutboxRuntime`), the inbox, retention,
// partition assignment, the reconciler and dead letters
// ---------------------------------------------------------------------------------------------

/**
 * Events waiting to be published (`PENDING`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const pending = gauge("outbox_pending", "Outbox events waiting to be published")

/**
 * Age of the oldest `PENDING` event in milliseconds (0 when none waits): how far publication lags.
 *
 * @since 0.1.0
 * @category metrics
 */
export const oldestPendingAge = gauge(
  "outbox_oldest_pending_age_ms",
  "Age of the oldest PENDING outbox event in milliseconds"
)

/**
 * `DISPATCHING` rows whose lease expired (waiting for stale recovery).
 *
 * @since 0.1.0
 * @category metrics
 */
export const staleLeases = gauge("outbox_stale_leases", "DISPATCHING outbox rows whose lease expired")

/**
 * Events committed but not yet finished by the consumer that drives the lifecycle (`PENDING`,
 * `DISPATCHING`, `PUBLISHED`, `UNDER_PROCESSING`): the pipeline's end-to-end lag, in events.
 *
 * @since 0.1.0
 * @category metrics
 */
export const unfinished = gauge(
  "outbox_unfinished",
  "Outbox events committed but not yet consumed to SUCCESS / PUSHED_FAILURE"
)

/**
 * Rows per status, with attribute `status`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const eventsByStatus = gauge("outbox_events", "Outbox rows by status")

/**
 * Messages handled by `processOnce`, with attribute `outcome` (`processed`, `already_processed`,
 * `failed`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const inboxProcessed = counter(
  "outbox_inbox_processed_total",
  "Messages handled by Inbox.processOnce, by outcome"
)

/**
 * Partitions added to topics because an assignment needed them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const partitionsGrown = counter(
  "outbox_partitions_grown_total",
  "Topic partition growths triggered by partition assignment"
)

/**
 * Processed-message records removed by inbox retention.
 *
 * @since 0.1.0
 * @category metrics
 */
export const inboxPurged = counter(
  "outbox_inbox_purged_total",
  "Processed-message (inbox) records removed by retention"
)

/**
 * Rows the sweep moved to `SUCCESS` because their driving group had already processed them.
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciled = counter(
  "outbox_reconciler_reconciled_total",
  "UNDER_PROCESSING rows moved to SUCCESS by the reconciler (inbox record found)"
)

/**
 * Rows `UNDER_PROCESSING` past `stuckAfter` without an inbox record of their driving group, as of
 * the last round.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerStuck = gauge(
  "outbox_consumer_stuck",
  "UNDER_PROCESSING outbox rows past the stuck timeout with no processed-message record"
)

/**
 * Dead letters not yet replayed, with attribute `topic` (the dead-letter topic).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLettersPending = gauge(
  "outbox_dead_letters_pending",
  "Records on a dead-letter topic from the first one not yet replayed to its end"
)

/**
 * Dead letters written, with attributes `topic` (the original topic) and `error` (the class).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLettered = counter(
  "outbox_dead_lettered_total",
  "Records sent to a dead-letter topic, by original topic and error class"
)

/**
 * Dead letters republished by `replay`, with attribute `topic` (the target).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLettersReplayed = counter(
  "outbox_dead_letters_replayed_total",
  "Dead letters republished to their original topic by replay"
)

// ---------------------------------------------------------------------------------------------
// consumer lag, from the broker
// ---------------------------------------------------------------------------------------------

// Documented where they are defined.
export { lagOf, type PartitionLag } from "./internal/telemetry/consumerLag.ts"
export { consumerHeldRecords, consumerOldestUnfinishedAge } from "./internal/telemetry/consumerWindow.ts"
export { logProbeLanded, logRetainedWal, logSlotLag } from "./internal/telemetry/logRelay.ts"

/**
 * Reads a group's committed offsets and the logs' end offsets from the broker (`BrokerAdmin`),
 * sets {@link consumerLag} for every partition of `topics`, and returns the rows (sum their
 * `lag` for the group's total).
 *
 * The committed offset is the consumer's durable position (it commits only past finished records):
 * read from the broker, not a live member, the gauge stays true while a consumer is stuck
 * retrying a record (it commits nothing while the log grows), crashed, or not running.
 *
 * @since 0.1.0
 * @category consumer lag
 */
export const sampleConsumerLag = (request: {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning?: boolean | undefined
}): Effect.Effect<ReadonlyArray<ConsumerLag.PartitionLag>, BrokerAdminError, BrokerAdmin> =>
  ConsumerLag.sample(consumerLag, request)

// ---------------------------------------------------------------------------------------------
// trace context
// ---------------------------------------------------------------------------------------------

// Documented where they are defined.
export {
  formatTraceparent,
  injectTraceparent,
  parentFromHeaders,
  parseTraceparent,
  TRACEPARENT_HEADER,
  withParentFromHeaders
} from "./internal/telemetry/traceContext.ts"
