/**
 * The log relay: the second relay engine. It holds the log's one lease (`LogSource`), reads
 * committed events in commit order, publishes them (`Publisher`) and confirms the log position
 * only after the broker acknowledged every event before it. Per-key order is commit order.
 *
 * After taking the lease, and after any publish that may have landed in part, the window it is
 * about to send may already be on the broker (a relay died between the broker's ack and the
 * confirm). Each event of that window is first looked up by its id (`BrokerProbe`), and only the
 * ones not found are sent: a crash does not publish twice. A probe that fails leaves the window
 * unsent until the next try, never guessed. While whole windows are found, the next is probed too.
 *
 * When the source keeps the relay's own progress (`LogLease.progress`), each acknowledged window's
 * end is saved before the confirm. A log that gives older windows again (a PostgreSQL restart
 * rewinds a slot to its last save) is then confirmed past what the progress covers without a send.
 *
 * With a backstop (`LogLease.backstop`), a re-created log's gap (the events committed between the
 * last published one and the new log's start) is read back from it and published first.
 *
 * With a quarantine (`LogLease.quarantine`), an event the broker refuses for good, or one the log
 * flags invalid, is moved there with the later events of its topic and key, and every other key
 * flows; an operator's retry or skip releases them. Without one, a refused window is retried with
 * backoff, and an invalid event is never published. A window larger than `maxWindow` is published
 * in parts of at most that many events, in order; before each window the lease's fence, when it
 * has one, proves the relay still holds the log. A source that cannot hold a transaction whole
 * gives it in part windows (`LogWindow.part`): each is published, saved (`LogProgress.savePart`)
 * and only then released (`LogLease.release`); a drain resuming inside it releases the saved part
 * first, so those events are not given again. Every process running `run` samples the slot's
 * gauges (`LogSource.gauges`), holder or not.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Backoff from "./Backoff.ts"
import { BrokerProbe } from "./BrokerProbe.ts"
import * as Jobs from "./internal/jobs.ts"
import * as Gap from "./internal/log/gap.ts"
import * as Gauges from "./internal/log/gauges.ts"
import * as Progress from "./internal/log/progress.ts"
import * as Publish from "./internal/log/publish.ts"
import * as Quarantine from "./internal/log/quarantine.ts"
import { type LogLease, type LogPart, LogSource, type LogSourceError, type LogWindow } from "./LogSource.ts"
import { Publisher } from "./Publisher.ts"
import * as Telemetry from "./Telemetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Log rows read per window (whole transactions, so a window can be larger). Default 500. */
  readonly batchSize?: number | undefined
  /** Wait after an empty read, for a source without `LogLease.awaitMore`. Default 50 ms. */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * For a source that signals new transactions (`LogLease.awaitMore`, the streaming PostgreSQL
   * transport, the in-memory log): the longest wait after an empty read, which ends as soon as a
   * transaction commits (no poll delay). Default 1 s.
   */
  readonly idleWait?: Duration.Input | undefined
  /** A standby tries the lease this often. Default 1 s. */
  readonly leaseRetryInterval?: Duration.Input | undefined
  /** First wait after a failed publish or probe; doubles, jittered, up to `maxBackoff` (`Backoff.exponential`). Default 200 ms. */
  readonly backoff?: Duration.Input | undefined
  /** Default 10 s. */
  readonly maxBackoff?: Duration.Input | undefined
  /** Sample the slot gauges at most this often. Default 5 s. */
  readonly gaugeInterval?: Duration.Input | undefined
  /** Probes look this far before an event's `createdAt` (clock skew writer/broker). Default 60 s. */
  readonly probeSkew?: Duration.Input | undefined
  /** Probes running at once for one window. Default 8. */
  readonly probeConcurrency?: number | undefined
  /**
   * After this many failed probes of one window in a row, send it without knowing (duplicates
   * possible, which the consumer's `Inbox` absorbs) rather than stall forever: a probe that can
   * never finish (a window hours old on a busy topic exceeds the probe's read limit) must not stop
   * the log. During a broker outage the send fails too, so nothing changes then. Default 5.
   */
  readonly maxProbeFailures?: number | undefined
  /**
   * While a backlog is read (a read returns a full window), the next window asks for twice as
   * many log rows, up to this many; an unsure window (after a takeover or a failed publish) is
   * read at this size, so it covers any window a previous holder with the same settings was
   * publishing. Default 8 × `batchSize`.
   */
  readonly maxWindow?: number | undefined
  /**
   * Read the next window while the broker acknowledges the current one, when the source can
   * (`LogLease.readAfter`). The position is still confirmed only after the ack, and the next
   * window is published only after that confirm. Default true.
   */
  readonly readAhead?: boolean | undefined
  /**
   * With a quarantine (`LogLease.quarantine`): how often the relay looks for events an operator
   * released (`retry`, `skip`) and publishes them. Default 1 s.
   */
  readonly quarantineInterval?: Duration.Input | undefined
}

/**
 * WAL bytes between the server's current position and the slot's confirmed one.
 *
 * @since 0.1.0
 * @category metrics
 */
export const slotLag = Telemetry.logSlotLag

/**
 * WAL bytes the server keeps on disk for the slot (from its restart position).
 *
 * @since 0.1.0
 * @category metrics
 */
export const retainedWal = Telemetry.logRetainedWal

/**
 * The slot's WAL status as a number: 0 reserved, 1 extended, 2 unreserved (about to be lost),
 * 3 lost, 4 the slot is missing. Sampled by every relay process.
 *
 * @since 0.1.0
 * @category metrics
 */
export const slotWalStatus = Gauges.walStatus

/**
 * WAL bytes that can still be written before the slot is lost (`-1`: no limit,
 * `max_slot_wal_keep_size = -1`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const slotSafeWal = Gauges.safeWal

/**
 * Events a rewound log gave again that the relay's durable progress (`LogLease.progress`) showed
 * already published, and so not re-sent.
 *
 * @since 0.1.0
 * @category metrics
 */
export const rewindSkipped = Progress.rewindSkipped

/**
 * Events of a re-created log's gap read back from its backstop (`LogLease.backstop`, the event
 * table) and published, those the broker already had excepted, before the new log.
 *
 * @since 0.1.0
 * @category metrics
 */
export const gapEvents = Gap.gapEvents

/**
 * Events of an unconfirmed window found on the broker by the takeover probe, and so not re-sent.
 *
 * @since 0.1.0
 * @category metrics
 */
export const probedLanded = Telemetry.logProbeLanded

/**
 * Runs forever: waits for the lease, then drains. Losing the lease (its connection dropped, a
 * log error) ends the drain; the relay then competes for the lease again.
 *
 * @since 0.1.0
 * @category constructors
 */
export const run = (settings: Settings = {}): Effect.Effect<never, never, LogSource | Publisher | BrokerProbe> =>
  Effect.gen(function* () {
    const source = yield* LogSource
    const leaseRetry = Duration.fromInputUnsafe(settings.leaseRetryInterval ?? "1 second")
    const attempt = Effect.scoped(
      Effect.gen(function* () {
        const lease = yield* source.acquire
        if (Option.isNone(lease)) return false
        yield* Effect.logInfo("log relay: lease taken")
        yield* drain(lease.value, settings)
        return true
      })
    ).pipe(
      Effect.catch((error: LogSourceError) =>
        Effect.as(Effect.logWarning(`log relay: lease lost or not taken: ${error.message}`), false)
      )
    )
    // Every process samples the slot on its own, holder or not (when the source can without the lease).
    if (source.gauges !== undefined) {
      yield* Effect.forkChild(Gauges.sampleForever(source.gauges, settings.gaugeInterval ?? "5 seconds"))
    }
    return yield* Jobs.every(leaseRetry, attempt)
  })

/**
 * Samples the slot's gauges (`LogSource.gauges`) every `gaugeInterval` (default 5 s), for ever,
 * for a process that does not run the relay. `run` does this itself.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sampleGauges = (settings: Pick<Settings, "gaugeInterval"> = {}): Effect.Effect<void, never, LogSource> =>
  Effect.gen(function* () {
    const source = yield* LogSource
    if (source.gauges === undefined) return
    yield* Gauges.sampleForever(source.gauges, settings.gaugeInterval ?? "5 seconds")
  })

const millis = (input: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(input))

const resolve = (settings: Settings) => {
  const batchSize = settings.batchSize ?? 500
  return {
    batchSize,
    maxWindow: Math.max(batchSize, settings.maxWindow ?? batchSize * 8),
    poll: Duration.fromInputUnsafe(settings.pollInterval ?? "50 millis"),
    idleWait: Duration.fromInputUnsafe(settings.idleWait ?? "1 second"),
    backoff: Backoff.exponential(settings.backoff ?? "200 millis", settings.maxBackoff ?? "10 seconds"),
    gaugeEvery: millis(settings.gaugeInterval ?? "5 seconds"),
    skew: millis(settings.probeSkew ?? "60 seconds"),
    probeConcurrency: settings.probeConcurrency ?? 8,
    maxProbeFailures: settings.maxProbeFailures ?? 5,
    quarantineEvery: millis(settings.quarantineInterval ?? "1 second")
  }
}

/**
 * The slot gauges, sampled at most every `gaugeEvery` ms, off the relay's path: a sample is a
 * database round trip, which inline would hold every event behind it (a commit → publish p99
 * stall every `gaugeEvery`). A sample that failed fails the next call, so a slot that is gone
 * still ends the drain.
 */
const gaugeSampler = (lease: LogLease, gaugeEvery: number, scope: Scope.Scope) => {
  let gaugedAt: number | undefined
  let failure: LogSourceError | undefined
  let running = false
  const sample = Effect.flatMap(lease.gauges, Gauges.record).pipe(
    Effect.catch((error: LogSourceError) =>
      Effect.sync(() => {
        failure = error
      })
    ),
    Effect.ensuring(
      Effect.sync(() => {
        running = false
      })
    )
  )
  return Effect.gen(function* () {
    if (failure !== undefined) return yield* Effect.fail(failure)
    const now = yield* Clock.currentTimeMillis
    if (running || (gaugedAt !== undefined && now - gaugedAt < gaugeEvery)) return
    gaugedAt = now
    running = true
    yield* Effect.forkIn(sample, scope) // ends with the lease
  })
}

/** What a drain carries from one window to the next. */
interface DrainState {
  /** The next window may already be on the broker (a takeover, a failed publish): probe it. */
  unsure: boolean
  /** The waits after failures (`Backoff.delays`), reset by a window that went through. */
  readonly delays: Backoff.Delays
  /** Log rows the next read asks for. */
  size: number
  /** When a position without events was last saved and confirmed (epoch ms). */
  idleConfirmedAt: number
}

/** One lease's drain: its settings, the helpers built at its start, and its state. */
interface Drain {
  readonly lease: LogLease
  readonly settings: ReturnType<typeof resolve>
  readonly readAfter: LogLease["readAfter"]
  readonly publisher: Publisher["Service"]
  readonly progress: Progress.Progress
  readonly gate: Quarantine.Gate
  readonly publish: ReturnType<typeof Publish.make>
  readonly gap: Gap.Filled
  readonly sampleGauges: Effect.Effect<void, LogSourceError>
  readonly state: DrainState
}

/** From the confirmed position; an unsure window at the largest size (see `maxWindow`). */
const readConfirmed = (d: Drain) =>
  Effect.suspend(() => d.lease.read(d.state.unsure ? d.settings.maxWindow : d.state.size))

/** Bigger windows while a backlog lasts (fewer reads), back to `batchSize` once it is drained. */
const nextSize = (d: Drain, window: LogWindow) => {
  const { batchSize, maxWindow } = d.settings
  const size = d.state.size
  d.state.size = (window.more ?? window.entries.length >= size) ? Math.min(size * 2, maxWindow) : batchSize
  return d.state.size
}

const IDLE_CONFIRM_EVERY = 1_000

/** No events: let the slot move past transactions without any, then wait for the next commit. */
const idle = (d: Drain, window: LogWindow) =>
  Effect.gen(function* () {
    // Transactions without events still hold WAL: let the slot move past them, at most once a
    // second (each is a save, then a confirm: the saved position is never behind the slot's,
    // see `Progress.saveIdle`), so a steady trickle of commits does not pay a save per wait.
    const now = yield* Clock.currentTimeMillis
    if (window.upTo !== null && now - d.state.idleConfirmedAt >= IDLE_CONFIRM_EVERY) {
      d.state.idleConfirmedAt = now
      yield* d.progress.saveIdle(window.upTo)
      yield* d.lease.confirm(window.upTo)
    }
    // Woken by the next commit when the source can tell; polled otherwise.
    const { lease, settings } = d
    yield* lease.awaitMore === undefined ? Effect.sleep(settings.poll) : lease.awaitMore(settings.idleWait)
    return yield* readConfirmed(d)
  })

/**
 * The window's events the relay's progress and the gap do not cover, sent (probed first while
 * unsure) and those refused set aside. `false`: not all acknowledged, read again from the confirmed position.
 */
const send = (d: Drain, window: LogWindow, position: string) =>
  Effect.gen(function* () {
    // A rewound log gives again what the relay's own progress shows published: not re-sent.
    const fresh = d.gap.skip(yield* d.progress.unpublished(window))
    // Still the holder? A relay cut off from the server stops here rather than publish
    // alongside the one that took its place.
    if (fresh.length > 0 && d.lease.fence !== undefined) yield* d.lease.fence
    const sent = yield* d.publish(fresh, position, d.state.unsure)
    if (sent === false) {
      d.state.unsure = true
      return false as const
    }
    yield* d.gate.put(Quarantine.inLogOrder(fresh, sent.aside))
    if (fresh.length > 0) d.state.unsure = sent.stillUnsure
    return fresh
  })

/**
 * Whole transactions: sent, recorded in the relay's progress, and only then confirmed, so the
 * log forgets them. The next window may have been read meanwhile (read-ahead), but is published
 * only after this one was acked and confirmed: at most one window is ever
 * unconfirmed-and-maybe-sent, the one a successor probes.
 */
const whole = (d: Drain, window: LogWindow, upTo: string) =>
  Effect.gen(function* () {
    const want = nextSize(d, window)
    const ahead = d.readAfter === undefined ? undefined : yield* Effect.forkChild(d.readAfter(upTo, want))
    const fresh = yield* send(d, window, upTo)
    if (fresh === false) {
      // Read again from the confirmed position (and probe): the read-ahead is dropped.
      if (ahead !== undefined) yield* Fiber.await(ahead)
      return yield* readConfirmed(d)
    }
    yield* fresh.length > 0 ? d.progress.save(upTo, fresh) : d.progress.saveIdle(upTo)
    yield* d.lease.confirm(upTo)
    yield* d.state.delays.reset
    const next = ahead === undefined ? undefined : yield* Fiber.join(ahead)
    return next ?? (yield* readConfirmed(d))
  })

/**
 * A part of one transaction too large to hold (`LogWindow.part`): sent, its place saved, then
 * released so the source reads on; the transaction's commit comes in a later window.
 */
const partOf = (d: Drain, window: LogWindow, part: LogPart) =>
  Effect.gen(function* () {
    nextSize(d, window)
    const fresh = yield* send(d, window, part.transaction)
    if (fresh === false) return yield* readConfirmed(d)
    if (fresh.length > 0) yield* d.progress.savePart(part, fresh)
    if (d.lease.release !== undefined) yield* d.lease.release(part)
    yield* d.state.delays.reset
    return yield* readConfirmed(d)
  })

/** One window, in log order; the next window. */
const step = (d: Drain, window: LogWindow): Effect.Effect<LogWindow, LogSourceError> =>
  Effect.gen(function* () {
    yield* d.sampleGauges
    yield* d.gate.release(d.publisher.publish, Publish.toRequest, d.lease.fence)
    if (window.part !== undefined) return yield* partOf(d, window, window.part)
    if (window.entries.length === 0 || window.upTo === null) {
      nextSize(d, window)
      return yield* idle(d, window)
    }
    return yield* whole(d, window, window.upTo)
  })

const drain = (lease: LogLease, settings: Settings) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const probe = yield* BrokerProbe
    const resolved = resolve(settings)
    const { backoff, gaugeEvery, maxWindow } = resolved
    const { maxProbeFailures, probeConcurrency, quarantineEvery, skew } = resolved
    // A previous holder may have published this window without confirming it.
    const state: DrainState = {
      unsure: true,
      delays: yield* Backoff.delays(backoff),
      size: resolved.batchSize,
      idleConfirmedAt: Number.NEGATIVE_INFINITY
    }

    const sampleGauges = gaugeSampler(lease, gaugeEvery, yield* Effect.scope)
    // Two reads of the relay's own records that do not depend on each other: at once, so a lease
    // starts publishing one round trip sooner.
    const [progress, gate] = yield* Effect.all([Progress.resume(lease), Quarantine.make(lease, quarantineEvery)], {
      concurrency: 2
    })

    const fail = (reason: string) =>
      Effect.gen(function* () {
        state.unsure = true
        const delay = yield* state.delays.next
        yield* Effect.logWarning(`log relay: ${reason}; retrying in ${delay} ms`)
        yield* Effect.sleep(Duration.millis(delay))
      })

    const publish = Publish.make({ publisher, probe, gate, fail, maxWindow, maxProbeFailures, probeConcurrency, skew })
    // A re-created log's gap, from the backstop, before anything the new log gives.
    const gap = yield* Gap.fill(lease, publish, gate, maxWindow)
    const readAfter = settings.readAhead === false ? undefined : lease.readAfter
    const d: Drain = {
      lease,
      settings: resolved,
      readAfter,
      publisher,
      progress,
      gate,
      publish,
      gap,
      sampleGauges,
      state
    }

    let window = yield* readConfirmed(d)
    while (true) window = yield* step(d, window)
  })
