/**
 * The slot's gauges, sampled by every relay process on its own schedule, lease or not: the WAL a
 * slot keeps matters most while no relay reads it (all down, or stuck).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { LogGauges, LogSourceError } from "../../LogSource.ts"
import * as Telemetry from "../../Telemetry.ts"

/** `wal_status` as a number an alert can compare: 0 reserved … 3 lost, 4 the slot is missing. */
export const walStatusCode = (status: string | undefined): number =>
  status === "reserved"
    ? 0
    : status === "extended"
      ? 1
      : status === "unreserved"
        ? 2
        : status === "lost"
          ? 3
          : status === "missing"
            ? 4
            : -1

export const walStatus = Metric.gauge("outbox_log_slot_wal_status", {
  description: "The log relay slot's WAL status: 0 reserved, 1 extended, 2 unreserved, 3 lost, 4 missing"
})

export const safeWal = Metric.gauge("outbox_log_slot_safe_wal_bytes", {
  description: "WAL bytes that can still be written before the log relay's slot is lost (-1: unlimited)"
})

/** Records one sample. A lost slot keeps no restart position: its retained WAL is left as it was. */
export const record = (gauges: LogGauges): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* Metric.update(Telemetry.logSlotLag, gauges.lagBytes)
    if (Number.isFinite(gauges.retainedBytes)) yield* Metric.update(Telemetry.logRetainedWal, gauges.retainedBytes)
    if (gauges.walStatus !== undefined) yield* Metric.update(walStatus, walStatusCode(gauges.walStatus))
    if (gauges.safeWalBytes !== undefined) yield* Metric.update(safeWal, gauges.safeWalBytes ?? -1)
  })

/**
 * Samples `gauges` every `every`, for ever. A failed sample (the slot is missing, the database
 * is down) is logged and counted as `missing` when the slot is gone, and the next one is tried.
 */
export const sampleForever = (gauges: Effect.Effect<LogGauges, LogSourceError>, every: Duration.Input) =>
  Effect.gen(function* () {
    const interval = Duration.fromInputUnsafe(every)
    while (true) {
      yield* gauges.pipe(
        Effect.flatMap(record),
        Effect.catch((error: LogSourceError) =>
          Effect.andThen(
            /gone|missing/.test(error.reason) ? Metric.update(walStatus, walStatusCode("missing")) : Effect.void,
            Effect.logWarning(`log relay: slot gauges not sampled: ${error.message}`)
          )
        )
      )
      yield* Effect.sleep(interval)
    }
  })
