/**
 * The Kafka layer's counters, the same for every driver.
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"

/**
 * @since 0.1.0
 * @category metrics
 */
export const publishedRecords = Metric.counter("outbox_kafka_published_records_total", {
  description: "Records the Kafka publisher got a broker acknowledgement for",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const producerResets = Metric.counter("outbox_kafka_producer_resets_total", {
  description: "Idempotent producers replaced after an uncertain failure or a partition-count change",
  incremental: true
})

/**
 * @since 0.1.0
 * @category metrics
 */
export const droppedCommits = Metric.counter("outbox_kafka_dropped_commits_total", {
  description: "Offset commits dropped because the partition was no longer assigned to this member",
  incremental: true
})
