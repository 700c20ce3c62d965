/**
 * The gap of a re-created log: a new PostgreSQL slot starts at the current end of the WAL, past
 * the events committed since the relay last published. Before the drain reads the new log, the
 * relay reads those events back from the backstop (`LogLease.backstop`, the event table) in the
 * order they were written, probes the broker for each page (some may have landed before the log was lost) and
 * sends the rest. The log may give some of them again (those committed after its new start but
 * inside the gap's bounds): they are skipped by id, so each is published once and every event of
 * the gap goes before anything the new log yields.
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as Scope from "effect/Scope"
import type { LogMessage } from "../../LogRecord.ts"
import type { LogGap, LogGapReader, LogLease, LogSourceError } from "../../LogSource.ts"
import type * as Publish from "./publish.ts"
import * as Quarantine from "./quarantine.ts"

/** Events read back from the backstop for the gap of a re-created log. */
export const gapEvents = Metric.counter("outbox_log_gap_events_total", {
  description: "Events of a re-created log's gap read back from the event table by the relay",
  incremental: true
})

export interface Filled {
  /** The entries of a window the gap did not already cover. */
  readonly skip: (entries: ReadonlyArray<LogMessage>) => ReadonlyArray<LogMessage>
}

const none: Filled = { skip: (entries) => entries }

const iso = (millis: number) => {
  const date = new Date(millis)
  return Number.isNaN(date.getTime()) ? `${millis} ms` : date.toISOString()
}

/** Says at ERROR which events are read again and why. */
const announce = (gap: LogGap) =>
  Effect.logError(
    `log relay: ${gap.reason ?? "the log was re-created"} (it starts at ${gap.start}, past events nobody published); ` +
      `re-reading the events enqueued from ${iso(gap.from)} to ${iso(gap.to)} ` +
      `(the newest published event ${gap.after ?? "unknown"}, less the margin for late commits) from the event table, ` +
      `publishing those the broker lacks before the new log`
  )

/**
 * Publishes the lease's gap, when its backstop reports one, page by page (`page` events); a page
 * that fails is retried after the relay's backoff (`publish` waits it). Read errors end the drain
 * with the gap still open, so the next lease reads it again.
 */
export const fill = (
  lease: LogLease,
  publish: ReturnType<typeof Publish.make>,
  gate: Quarantine.Gate,
  page: number
): Effect.Effect<Filled, LogSourceError> =>
  Effect.gen(function* () {
    const backstop = lease.backstop
    if (backstop === undefined) return none
    const gap = yield* backstop.gap
    if (gap === null) return none
    yield* announce(gap)
    const covered = yield* Effect.scoped(publishGap(backstop.open(gap), gap, publish, gate, page, lease.fence))
    yield* backstop.close(gap)
    return covered.size === 0 ? none : { skip: (entries) => entries.filter((m) => !covered.has(m.id)) }
  })

/** Publishes every page of the gap; the ids it covered. */
const publishGap = (
  open: Effect.Effect<LogGapReader, LogSourceError, Scope.Scope>,
  gap: LogGap,
  publish: ReturnType<typeof Publish.make>,
  gate: Quarantine.Gate,
  page: number,
  fence: LogLease["fence"]
) =>
  Effect.gen(function* () {
    const read = yield* open
    const covered = new Set<string>()
    let after: string | undefined
    let count = 0
    while (true) {
      const { events, more } = yield* read(after, page)
      if (events.length > 0) {
        // Still the holder (as before each window of the log)? Then every page probed: events
        // before the loss may be on the broker already.
        if (fence !== undefined) yield* fence
        const sent = yield* publish(events, gap.start, true)
        if (sent === false) continue
        yield* gate.put(Quarantine.inLogOrder(events, sent.aside))
        for (const m of events) {
          covered.add(m.id)
          if (after === undefined || m.id > after) after = m.id
        }
        count += events.length
        yield* Metric.update(gapEvents, events.length)
      }
      if (!more) break
    }
    yield* Effect.logError(
      `log relay: the gap of the re-created log is published: ${count} events read back from ${iso(gap.from)} to ${iso(gap.to)}, each on the broker now (those it already had were not re-sent)`
    )
    return covered
  })
