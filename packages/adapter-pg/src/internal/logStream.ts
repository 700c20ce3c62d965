/**
 * The log source's streaming transport: one replication connection (`replication=database`,
 * through `pg`, `logConnection.ts`) that holds the lease and streams the slot with
 * `START_REPLICATION … LOGICAL`.
 *
 * - XLogData ('w') frames carry pgoutput messages (the event table's inserts, binary); whole
 *   transactions (up to their 'C') are buffered in memory, decoded and validated, from the
 *   confirmed position on. Reads are served from the buffer; `confirm` drops what it covers and
 *   sends a standby status update with flush = upTo, which is what moves the slot's
 *   `confirmed_flush_lsn`. Nothing else is ever reported flushed.
 * - Backpressure: past `maxBufferedBytes` of unconfirmed transactions (whole, and the one being
 *   received) the socket is paused; confirms and releases that bring it under half resume it.
 * - A transaction larger than that is never held whole: once the socket is paused with nothing
 *   whole buffered, a read gives the transaction's events received so far as a part window
 *   (`LogWindow.part`, the transaction named by its commit position from its 'B'). The relay
 *   publishes it and `release`s it, which drops it and resumes the socket. A released part is
 *   also dropped when the server sends the transaction again (a new lease after a restart).
 * - Liveness: a status update asking for a reply goes out every `statusInterval`, so the server
 *   does not time out a relay that is not reading (backpressure); a stream that heard nothing
 *   from the server for `silenceLimit` while reading is lost (a half-open connection), besides
 *   TCP keep-alive on the socket.
 * - The lease: a session advisory lock taken on the same connection before START_REPLICATION
 *   (the SQL transport takes the same lock, so the two exclude each other), and the slot itself:
 *   a slot another walsender holds (SQLSTATE 55006) is `None`.
 * - A missing slot is a non-retriable `LogSourceError` saying how to create it: never created here.
 * - A lost connection fails every later call with a retriable `LogSourceError`.
 */
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import type { LogLease, LogPart, LogSourceError, LogWindow } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type pg from "pg"
import * as LeaseLock from "./leaseLock.ts"
import { type Config, connect, query, startReplication, statusUpdate } from "./logConnection.ts"
import { slotMissing } from "./logSetup.ts"
import {
  emptyOpen,
  lose,
  partReady,
  pauseIfFull,
  resumeIfRoom,
  type State,
  send,
  type WireConnection,
  wake
} from "./logStreamState.ts"
import * as Pgoutput from "./pgoutput.ts"

export type { Config } from "./logConnection.ts"

/** Takes the lease over a replication connection and starts streaming; `None` while it is held. */
export const acquire = (config: Config): Effect.Effect<Option.Option<LogLease>, LogSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const { slot } = config
    // A standby asks the pool first: while the lease is held, a try costs one pooled query
    // instead of a new replication connection (a backend and a walsender, every retry interval).
    // Only a shortcut: a lease taken after this answer is still refused below.
    if (yield* config.held) return Option.none<LogLease>()
    const client = yield* connect(config)
    // Replication connections take the simple query protocol only: no parameters. The slot name
    // is checked against [a-z0-9_] before it gets here.
    const [lock] = yield* query(client, LeaseLock.tryLock(`'${slot}'`))
    if (lock?.ok !== true) return Option.none<LogLease>()
    if (!(yield* config.exists)) return yield* slotMissing(slot)
    const [row] = yield* query(
      client,
      `SELECT confirmed_flush_lsn::text AS lsn, pg_current_wal_flush_lsn()::text AS flushed
         FROM pg_replication_slots WHERE slot_name = '${slot}'`
    )
    if (typeof row?.lsn !== "string") return yield* slotMissing(slot)
    const stream = makeStream(client, config, Pgoutput.lsnValue(row.lsn), Pgoutput.lsnValue(String(row.flushed)))
    const started = yield* startReplication(
      client,
      `START_REPLICATION SLOT ${slot} LOGICAL ${row.lsn} (proto_version '1', publication_names '${slot}', binary 'true')`,
      stream.lose
    )
    if (!started) return Option.none<LogLease>()
    yield* Effect.addFinalizer(() => stream.close)
    yield* Effect.forkScoped(Effect.repeat(stream.sendStatus, Schedule.spaced(config.statusInterval)))
    return Option.some(stream.lease)
  })

/** Adds one event of the open transaction, unless the relay released it already. */
const received = (state: State, entry: LogMessage, frameBytes: number) => {
  const open = state.open
  const index = open.count++
  const released = state.released
  if (released !== undefined && released.commit === open.commit && index < released.done) {
    open.first = index + 1
    return
  }
  open.entries.push(entry)
  open.sizes.push(frameBytes)
  open.bytes += frameBytes
}

const committed = (state: State, data: Buffer) => {
  const { open } = state
  const end = Pgoutput.commitEnd(data)
  const upTo = Pgoutput.lsnText(end)
  const entries = open.entries
  Pgoutput.stamp(entries, 0, upTo)
  const { bytes, commit, first, rows } = open
  state.buffered.push({ commit, entries, first, end, upTo, rows, bytes })
  state.bufferedBytes += bytes
  state.bufferedRows += rows
  state.open = emptyOpen()
  if (state.released?.commit === commit) state.released = undefined
  wake(state)
}

/** Listens to the copy stream: buffers transactions, answers keepalives. */
const receive = (state: State) => {
  const { config, connection } = state
  // One decoder for the connection: the server describes a relation once per session.
  const decoder = Pgoutput.makeDecoder(config.table)

  const onPgoutput = (data: Buffer, frameBytes: number, at: () => string) => {
    const tag = data[0]
    const open = state.open
    open.rows++
    if (tag === Pgoutput.TAG_BEGIN) {
      open.commit = data.readBigUInt64BE(1) // final_lsn: the commit's position
      open.bytes += frameBytes
    } else if (tag === Pgoutput.TAG_COMMIT) {
      open.bytes += frameBytes
      committed(state, data)
    } else {
      const entry = Pgoutput.change(decoder, data, at, open.count)
      if (entry === undefined) open.bytes += frameBytes
      else received(state, entry, frameBytes)
    }
    pauseIfFull(state)
  }

  connection.on("copyData", (message: { chunk: Buffer }) => {
    const chunk = message.chunk
    state.heardAt = Date.now()
    if (chunk[0] === 0x77) {
      // 'w': dataStart Int64, walEnd Int64, sendTime Int64, then the pgoutput message.
      onPgoutput(chunk.subarray(25), chunk.length, () => Pgoutput.lsnText(chunk.readBigUInt64BE(1)))
      if (!state.caughtUp && chunk.readBigUInt64BE(9) >= state.catchUp) reached(state)
    } else if (chunk[0] === 0x6b) {
      // 'k': walEnd Int64, sendTime Int64, replyRequested Byte1.
      const walEnd = chunk.readBigUInt64BE(1)
      if (walEnd > state.serverEnd) state.serverEnd = walEnd
      if (!state.caughtUp && walEnd >= state.catchUp) reached(state)
      if (chunk[17] === 1) send(state, statusUpdate(state.confirmed))
    }
  })
  connection.on("end", () => lose(state)(new Error("the server closed the connection")))
  connection.on("error", lose(state))
}

/** The events received so far of the transaction being received, at most `maxEntries`. */
const partWindow = (state: State, maxEntries: number): LogWindow => {
  const { open } = state
  const entries = open.entries.slice(0, Math.max(1, maxEntries))
  const part: LogPart = { transaction: Pgoutput.lsnText(open.commit), done: open.first + entries.length }
  return { entries, upTo: null, more: true, part }
}

/** Whole transactions from `buffered[from]`, stopping after the one that reaches `maxEntries` rows. */
const windowFrom = (state: State, from: number, maxEntries: number): Effect.Effect<LogWindow, LogSourceError> => {
  const { buffered } = state
  if (from === 0 && partReady(state)) return Effect.succeed(partWindow(state, maxEntries))
  const out: Array<LogMessage> = []
  let read = 0
  let i = from
  let upTo: string | null = null
  while (i < buffered.length && (read === 0 || read < maxEntries)) {
    const t = buffered[i++]!
    for (const e of t.entries) out.push(e)
    read += t.rows
    upTo = t.upTo
  }
  // Nothing buffered: the keepalive position lets the relay confirm past WAL without events.
  if (from === 0 && buffered.length === 0 && state.serverEnd > state.confirmed) upTo = Pgoutput.lsnText(state.serverEnd)
  return Effect.succeed({ entries: out, upTo, more: i < buffered.length })
}

const confirmTo = (state: State, upTo: string) => {
  const position = Pgoutput.lsnValue(upTo)
  if (position <= state.confirmed) return
  const { buffered } = state
  let drop = 0
  while (drop < buffered.length && buffered[drop]!.end <= position) {
    state.bufferedBytes -= buffered[drop]!.bytes
    state.bufferedRows -= buffered[drop++]!.rows
  }
  buffered.splice(0, drop)
  state.confirmed = position
  send(state, statusUpdate(position))
  resumeIfRoom(state)
}

/** Drops the first `part.done` events of its transaction, held now or sent again later. */
const release = (state: State, part: LogPart) => {
  const commit = Pgoutput.lsnValue(part.transaction)
  if (state.released?.commit !== commit || state.released.done < part.done) state.released = { commit, done: part.done }
  const { open } = state
  if (open.count > 0 && open.commit === commit) {
    const n = Math.min(Math.max(0, part.done - open.first), open.entries.length)
    let bytes = 0
    for (let i = 0; i < n; i++) bytes += open.sizes[i]!
    open.entries.splice(0, n)
    open.sizes.splice(0, n)
    open.bytes -= bytes
    open.first += n
  }
  // Sent whole before the part was released (a new lease that resumes inside it).
  for (const t of state.buffered) {
    if (t.commit !== commit) continue
    const n = Math.max(0, part.done - t.first)
    t.entries = t.entries.slice(n)
    t.first += n
  }
  resumeIfRoom(state)
}

const reached = (state: State) => {
  state.caughtUp = true
  wake(state)
}

/** The signal of the next commit, keepalive catch-up or loss (or `timeout`). */
const signal = (state: State, timeout: Duration.Input) =>
  Effect.callback<void>((resume) => {
    const done = () => resume(Effect.void)
    state.waiters.add(done)
    return Effect.sync(() => state.waiters.delete(done))
  }).pipe(Effect.timeoutOption(timeout), Effect.asVoid)

const CATCH_UP_LIMIT = 10_000

/**
 * Until the stream has caught up with the WAL flushed when it started, a read from the confirmed
 * position waits for it, unless the buffer already holds `maxEntries` rows (the read is full
 * either way) or is paused: right after a takeover the relay reads the predecessor's possibly
 * published window and probes it, so that window must hold every transaction the predecessor
 * could have read. Bounded (10 s): a stream that cannot catch up reads what it has.
 */
const caughtUp = (state: State, maxEntries: number) =>
  Effect.suspend(() => {
    const deadline = Date.now() + CATCH_UP_LIMIT
    const loop: Effect.Effect<void> = Effect.suspend(() =>
      state.caughtUp ||
      state.paused ||
      state.lost !== undefined ||
      state.bufferedRows >= maxEntries ||
      Date.now() >= deadline
        ? Effect.void
        : Effect.andThen(signal(state, Duration.millis(Math.max(1, deadline - Date.now()))), loop)
    )
    return loop
  })

const leaseOf = (state: State): LogLease => {
  const live = <A>(f: () => Effect.Effect<A, LogSourceError>) =>
    Effect.suspend(() => (state.lost === undefined ? f() : Effect.fail(state.lost)))
  return {
    read: (maxEntries) =>
      Effect.andThen(
        caughtUp(state, maxEntries),
        live(() => windowFrom(state, 0, maxEntries))
      ).pipe(Effect.withSpan("pg.log.read", undefined, { captureStackTrace: false })),
    readAfter: state.config.readAhead
      ? (after, maxEntries) =>
          live(() => {
            const position = Pgoutput.lsnValue(after)
            let from = 0
            while (from < state.buffered.length && state.buffered[from]!.end <= position) from++
            return windowFrom(state, from, maxEntries)
          })
      : undefined,
    confirm: (upTo) =>
      live(() => Effect.sync(() => confirmTo(state, upTo))).pipe(
        Effect.withSpan("pg.log.confirm", undefined, { captureStackTrace: false })
      ),
    release: (part) => live(() => Effect.sync(() => release(state, part))),
    awaitMore: (timeout) =>
      Effect.suspend(() => {
        const deadline = Date.now() + Duration.toMillis(Duration.fromInputUnsafe(timeout))
        // Woken by any signal (a commit, the catch-up, the loss): wait again unless there are events
        // to read. Transactions without events (DDL such as a new partition, other databases'
        // keepalives) do not wake the relay; it reads and confirms them after `timeout`.
        const loop: Effect.Effect<void, LogSourceError> = live(() =>
          state.buffered.some((t) => t.entries.length > 0) || partReady(state) || Date.now() >= deadline
            ? Effect.void
            : Effect.andThen(signal(state, Duration.millis(Math.max(1, deadline - Date.now()))), loop)
        )
        return loop
      }),
    gauges: state.config.gauges
  }
}

const makeStream = (client: pg.Client, config: Config, start: bigint, catchUp: bigint) => {
  const state: State = {
    config,
    connection: (client as unknown as { connection: WireConnection }).connection,
    buffered: [],
    bufferedBytes: 0,
    open: emptyOpen(),
    released: undefined,
    paused: false,
    heardAt: Date.now(),
    confirmed: start,
    serverEnd: start,
    caughtUp: start >= catchUp,
    catchUp,
    bufferedRows: 0,
    lost: undefined,
    closed: false,
    waiters: new Set()
  }
  receive(state)
  return {
    lease: leaseOf(state),
    lose: lose(state),
    sendStatus: Effect.sync(() => checkIn(state)),
    close: Effect.sync(() => {
      state.closed = true
      wake(state)
    })
  }
}

/**
 * Every `statusInterval`: a status update asking the server for a reply, unless the server has
 * been silent for `silenceLimit` while the socket was read (paused, its replies wait unread),
 * which ends the stream: a half-open connection is given up long before the server's
 * `wal_sender_timeout` lets another relay take the slot.
 */
const checkIn = (state: State) => {
  const silent = Date.now() - state.heardAt
  const limit = Duration.toMillis(Duration.fromInputUnsafe(state.config.silenceLimit))
  if (!state.paused && silent > limit) {
    lose(state)(new Error(`nothing heard from the server for ${silent} ms (status replies requested every interval)`))
    return
  }
  send(state, statusUpdate(state.confirmed, true))
}

export const defaultStatusInterval = Duration.seconds(10)

/** Two status intervals and a margin: a live server answers each request within milliseconds. */
export const defaultSilenceLimit = Duration.seconds(25)
