/**
 * The in-flight window of a consumer with key-ordered concurrency (`concurrency: { by: "key" }`),
 * per partition, with attributes `group`, `topic` and `partition`. Re-exported by `Telemetry`.
 */
import * as Metric from "effect/Metric"

/**
 * Records a partition holds in memory: queued behind their key or running. At the window's
 * bound (`maxHeld`) the partition stops fetching until records finish.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerHeldRecords = Metric.gauge("outbox_consumer_held_records", {
  description: "Records a partition holds in memory under key-ordered concurrency (queued or running)"
})

/**
 * Milliseconds since the oldest record a partition holds was taken in (0 when it holds none). It
 * grows while a key is slow or retrying: its successors, and the partition's committed offset,
 * wait for it.
 *
 * @since 0.1.0
 * @category metrics
 */
export const consumerOldestUnfinishedAge = Metric.gauge("outbox_consumer_oldest_unfinished_age_ms", {
  description: "Age in milliseconds of the oldest record a partition holds under key-ordered concurrency"
})
