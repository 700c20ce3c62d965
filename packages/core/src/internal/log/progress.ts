/**
 * The log relay's durable progress, as the drain uses it: what of a window the broker already
 * has by the relay's own record. A server restart rewinds a PostgreSQL slot to its last save; the
 * windows it gives again are at or behind the saved position and are confirmed without a send.
 * A transaction relayed in parts (`LogWindow.part`) is recorded part by part: a relay that
 * restarts inside it has the source drop the saved part (`LogLease.release`) before reading.
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { LogMessage } from "../../LogRecord.ts"
import type { LogLease, LogPart, LogSourceError, LogWindow } from "../../LogSource.ts"

/** Events a rewound log gave again that the progress showed already published. */
export const rewindSkipped = Metric.counter("outbox_log_rewind_skipped_total", {
  description: "Events of a rewound log the relay's progress showed already published",
  incremental: true
})

export interface Progress {
  /**
   * The entries of the window past the saved position. Entries without a `position` in a window
   * that ends past it are kept (the relay's probe decides for them).
   */
  readonly unpublished: (window: LogWindow) => Effect.Effect<ReadonlyArray<LogMessage>>
  /** Saves `upTo` (and the newest id of `sent`) after the broker acknowledged everything before it. */
  readonly save: (upTo: string, sent: ReadonlyArray<LogMessage>) => Effect.Effect<void, LogSourceError>
  /**
   * Before an eventless position is confirmed: saves it too (once the relay has progress), so the
   * saved position is never behind the log's confirmed one, and a log found ahead of it was moved
   * by someone else (a slot created by hand): its gap is read back from the backstop.
   */
  readonly saveIdle: (upTo: string) => Effect.Effect<void, LogSourceError>
  /** Saves a part window once the broker acknowledged it (nothing without `savePart`). */
  readonly savePart: (part: LogPart, sent: ReadonlyArray<LogMessage>) => Effect.Effect<void, LogSourceError>
}

const everything: Progress = {
  unpublished: (w) => Effect.succeed(w.entries),
  save: () => Effect.void,
  saveIdle: () => Effect.void,
  savePart: () => Effect.void
}

/**
 * Reads the lease's saved progress once, at the start of its drain. A saved part is released to
 * the source at once: its events are on the broker, the log will give them again.
 */
export const resume = (lease: LogLease): Effect.Effect<Progress, LogSourceError> =>
  Effect.gen(function* () {
    const progress = lease.progress
    if (progress === undefined) return everything
    let saved = yield* progress.published
    const part = progress.publishedPart === undefined ? null : yield* progress.publishedPart
    if (part !== null && lease.release !== undefined) {
      yield* Effect.logInfo(
        `log relay: resuming inside the transaction ${part.transaction}: its first ${part.done} events are on the broker already`
      )
      yield* lease.release(part)
    }
    const compare = progress.compare
    const behind = (position: string | undefined) =>
      saved !== null && position !== undefined && compare(position, saved) <= 0
    // The entries of one transaction share its position: compared once per transaction, not per event.
    const notBehind = (entries: ReadonlyArray<LogMessage>) => {
      let last: string | undefined
      let lastBehind = false
      return entries.filter((m) => {
        if (m.position !== last || last === undefined) {
          last = m.position
          lastBehind = behind(m.position)
        }
        return !lastBehind
      })
    }
    const unpublished = (window: LogWindow) =>
      Effect.gen(function* () {
        if (saved === null || window.entries.length === 0) return window.entries
        const at = window.part?.transaction ?? window.upTo
        if (at === null) return window.entries
        // A part's transaction commits at `transaction`: before the saved position, all of it is published.
        const rest =
          window.part !== undefined
            ? compare(at, saved) < 0
              ? []
              : window.entries
            : behind(at)
              ? []
              : notBehind(window.entries)
        const skipped = window.entries.length - rest.length
        if (skipped > 0) {
          yield* Metric.update(rewindSkipped, skipped)
          yield* Effect.logWarning(
            `log relay: the log gave ${skipped} events again up to ${at} (rewound behind the relay's progress ${saved}); already published, not re-sent`
          )
        }
        return rest
      })
    const save = (upTo: string, sent: ReadonlyArray<LogMessage>) =>
      Effect.tap(progress.save(upTo, newest(sent)), () =>
        Effect.sync(() => {
          if (saved === null || compare(upTo, saved) > 0) saved = upTo
        })
      )
    const saveIdle = (upTo: string) =>
      Effect.suspend(() => (saved === null || compare(upTo, saved) <= 0 ? Effect.void : save(upTo, [])))
    const savePart = (part: LogPart, sent: ReadonlyArray<LogMessage>) =>
      progress.savePart === undefined ? Effect.void : progress.savePart(part, newest(sent))
    return { unpublished, save, saveIdle, savePart }
  })

/** The highest id among `sent` (UUIDv7 text compares as its time). */
const newest = (sent: ReadonlyArray<LogMessage>): string | undefined => {
  let top: string | undefined
  for (const m of sent) if (m.invalid === undefined && (top === undefined || m.id > top)) top = m.id
  return top
}
