/**
 * The port the log relay reads: a durable, ordered log of committed events (on PostgreSQL, a
 * logical replication slot) with one lease. Events come in commit order, whole transactions at a
 * time; a position is confirmed only after the broker acknowledged everything before it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { LogSourceError } from "./Errors.ts"
import type { LogQuarantine } from "./LogQuarantine.ts"
import type { LogMessage } from "./LogRecord.ts"

export {
  /**
   * The log failed (lost connection, slot gone, decoding error). `retriable` says whether taking
   * the lease again may help.
   *
   * @since 0.1.0
   * @category errors
   */
  LogSourceError
} from "./Errors.ts"

/**
 * Events read from the confirmed position on. `upTo` is the position just past the last whole
 * transaction read (`null` when nothing new committed): confirming it confirms every entry.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogWindow {
  readonly entries: ReadonlyArray<LogMessage>
  readonly upTo: string | null
  /** The read stopped at `maxEntries` log rows: more is probably committed behind it (a backlog). */
  readonly more?: boolean | undefined
  /**
   * Set when the window is a part of one transaction still being read (a transaction too large
   * to hold whole): `entries` are its next events, `upTo` is `null` (its commit has not been read).
   * See {@link LogPart}.
   */
  readonly part?: LogPart | undefined
}

/**
 * Where a part window sits: its entries are events of the transaction `transaction` (named by its
 * commit position, in the log's position terms, known before its commit is read), the last of them
 * its `done`-th. The relay publishes the part, saves that it did (`LogProgress.savePart`), then
 * lets the source drop it (`LogLease.release`), so one transaction of any size is relayed in
 * bounded memory; after a restart the saved part is released first and never given again.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogPart {
  readonly transaction: string
  readonly done: number
}

/**
 * What the slot holds back: `lagBytes` of WAL not yet confirmed, `retainedBytes` of WAL kept on
 * disk for it.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogGauges {
  readonly lagBytes: number
  readonly retainedBytes: number
  /**
   * The server's verdict on the slot's WAL, when it gives one (PostgreSQL's `wal_status`):
   * `reserved`, `extended`, `unreserved` (about to be lost), `lost` (the slot can no longer be read).
   */
  readonly walStatus?: string | undefined
  /** WAL that can still be written before the slot is lost; `null` when unlimited. */
  readonly safeWalBytes?: number | null | undefined
}

/**
 * The relay's own durable record of what reached the broker: the highest window end (`upTo`)
 * whose events the broker acknowledged, saved after the ack and before the confirm. It survives
 * what the log's confirmed position may not (a server restart rewinds a PostgreSQL slot to its
 * last save), so the relay can tell a rewound log from new events and skip, not re-send, what it
 * already published.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogProgress {
  /** The position last saved (`null` when nothing was saved, or the record is not this log's). */
  readonly published: Effect.Effect<string | null, LogSourceError>
  /**
   * Records that every event up to `upTo` is on the broker, and `newest`, the highest event id
   * among them (where a gap in the log starts: see {@link LogBackstop}). Never moves either back.
   */
  readonly save: (upTo: string, newest?: string | undefined) => Effect.Effect<void, LogSourceError>
  /** Orders two positions of this log: negative when `a` comes before `b`, 0 when equal. */
  readonly compare: (a: string, b: string) => number
  /**
   * Optional, for a source that gives part windows: the part last saved, when its transaction
   * has not been saved whole since (`null` otherwise).
   */
  readonly publishedPart?: Effect.Effect<LogPart | null, LogSourceError> | undefined
  /**
   * Optional, with `publishedPart`: records, durably before it returns, that the first
   * `part.done` events of `part.transaction` are on the broker (and `newest`, their highest id).
   * A later `save` clears it.
   */
  readonly savePart?: ((part: LogPart, newest?: string | undefined) => Effect.Effect<void, LogSourceError>) | undefined
}

/**
 * Events the log may not give, because it was re-created (a dropped slot created again, a new
 * primary after a fail-over): a new PostgreSQL slot starts at the current end of the WAL, past
 * the events committed since the relay's last published one. `from` and `to` bound, in the
 * events' own time (epoch millis of their ids), where those events are in the backstop table.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogGap {
  /** The log's new start, as the source names it (for the log line). */
  readonly start: string
  /** The newest event id the relay published before the gap, when known. */
  readonly after: string | null
  readonly from: number
  readonly to: number
  /** Why the log lacks them, when not re-created by the setup step (for the log line). */
  readonly reason?: string | undefined
}

/**
 * Reads an open gap: a page of its events with ids above `after` (the highest id of the previous
 * page), at most `limit`, in the order they were written as far as the backstop can tell; `more`
 * when the gap goes on past the page.
 *
 * @since 0.1.0
 * @category models
 */
export type LogGapReader = (
  after: string | undefined,
  limit: number
) => Effect.Effect<{ readonly events: ReadonlyArray<LogMessage>; readonly more: boolean }, LogSourceError>

/**
 * The log's backstop: the events kept where the relay can read them again (on PostgreSQL, the
 * event table), for a log that lost some of them.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogBackstop {
  /** The gap left by a re-created log, or `null` when there is none. */
  readonly gap: Effect.Effect<LogGap | null, LogSourceError>
  /**
   * Opens the gap for reading, for the scope: every page is read from one snapshot of the
   * backstop, so of each key it gives the events committed up to one moment and the log gives the
   * rest (never a later event without an earlier one).
   */
  readonly open: (gap: LogGap) => Effect.Effect<LogGapReader, LogSourceError, Scope.Scope>
  /** Records that the gap is on the broker: it is not read again. */
  readonly close: (gap: LogGap) => Effect.Effect<void, LogSourceError>
}

/**
 * The one relay's hold on the log, for the scope it was acquired in.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogLease {
  /**
   * Reads (without consuming) from the confirmed position: at least one whole transaction when
   * any committed, stopping after the transaction that reaches `maxEntries` log rows. Reading
   * twice without `confirm` returns the same events again.
   */
  readonly read: (maxEntries: number) => Effect.Effect<LogWindow, LogSourceError>
  /**
   * Optional read-ahead: the window that follows position `after` (the `upTo` of a window read
   * but not confirmed yet), so the relay can read the next window while the broker acknowledges
   * the current one. `undefined` when the source cannot read ahead now (the relay then confirms
   * and reads from the confirmed position). Confirming stays separate: nothing read ahead is
   * confirmed by reading it.
   */
  readonly readAfter?:
    | ((after: string, maxEntries: number) => Effect.Effect<LogWindow | undefined, LogSourceError>)
    | undefined
  /**
   * Optional wake-up, for a source that learns of commits as they happen (a replication stream):
   * completes once a whole transaction with events past the confirmed position can be read (at
   * once when one already can), or when `timeout` passes, whichever is first. The relay waits on it after an
   * empty read instead of sleeping a poll interval. Fails when the log is lost, like `read`.
   */
  readonly awaitMore?: ((timeout: Duration.Input) => Effect.Effect<void, LogSourceError>) | undefined
  /** Moves the confirmed position to `upTo` of a window: its events are never read again. */
  readonly confirm: (upTo: string) => Effect.Effect<void, LogSourceError>
  /**
   * For a source that gives part windows (`LogWindow.part`): drops the first `part.done` events
   * of `part.transaction`, which the broker has, now and when the log gives that transaction
   * again (after a restart); the confirmed position stays before it until its commit is confirmed.
   */
  readonly release?: ((part: LogPart) => Effect.Effect<void, LogSourceError>) | undefined
  readonly gauges: Effect.Effect<LogGauges, LogSourceError>
  /** Optional durable progress (see {@link LogProgress}); without it a rewound log is re-sent. */
  readonly progress?: LogProgress | undefined
  /**
   * Optional backstop (see {@link LogBackstop}): after taking the lease the relay publishes the
   * gap of a re-created log from it, before anything the log gives.
   */
  readonly backstop?: LogBackstop | undefined
  /**
   * Optional quarantine (see `LogQuarantine`): events the broker refuses for good, or flagged
   * `invalid`, are moved there and every other key flows. Without it the relay retries a refused
   * window with backoff, and never publishes an invalid event.
   */
  readonly quarantine?: LogQuarantine | undefined
  /**
   * Optional fencing: proves, by a fresh round trip to the log's server within a bound shorter
   * than the server's own timeout for a silent holder, that this lease still holds the log. The
   * relay runs it before publishing each window; it fails when the lease moved on or the proof
   * did not come in time, and the relay then stops publishing and competes for the lease again.
   */
  readonly fence?: Effect.Effect<void, LogSourceError> | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export class LogSource extends Context.Service<
  LogSource,
  {
    /**
     * Takes the log's one lease, or `None` while another relay holds it. The lease ends with the
     * scope, or when the holder's connection drops (a killed relay frees it).
     */
    readonly acquire: Effect.Effect<Option.Option<LogLease>, LogSourceError, Scope.Scope>
    /**
     * Optional: the slot's gauges without the lease, so every process (the holder and the
     * standbys) samples them and an alert can fire while no relay holds the log.
     */
    readonly gauges?: Effect.Effect<LogGauges, LogSourceError> | undefined
  }
>()("@effect-outbox/core/LogSource") {}
