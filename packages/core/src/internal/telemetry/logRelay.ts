/**
 * The log relay's metrics: its slot's lag and retained WAL, and what the takeover probe found.
 * Re-exported by `Telemetry`.
 */
import * as Metric from "effect/Metric"

/**
 * WAL bytes between the server's current position and the slot's confirmed one.
 *
 * @since 0.1.0
 * @category metrics
 */
export const logSlotLag = Metric.gauge("outbox_log_slot_lag_bytes", {
  description: "WAL bytes the log relay's slot has not confirmed yet"
})

/**
 * WAL bytes the server keeps on disk for the slot (from its restart position).
 *
 * @since 0.1.0
 * @category metrics
 */
export const logRetainedWal = Metric.gauge("outbox_log_retained_wal_bytes", {
  description: "WAL bytes retained on the server for the log relay's slot"
})

/**
 * Events of an unconfirmed window found on the broker by the takeover probe, and so not re-sent.
 *
 * @since 0.1.0
 * @category metrics
 */
export const logProbeLanded = Metric.counter("outbox_log_probe_landed_total", {
  description: "Events of an unconfirmed log window the probe found already published",
  incremental: true
})
