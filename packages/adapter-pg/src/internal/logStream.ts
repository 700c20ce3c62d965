/**
 * The log source's streaming transport: one replication connection (`replication=database`,
 * through `pg`) that holds the lease and streams the slot with `START_REPLICATION … LOGICAL`.
 *
 * - XLogData ('w') frames carry pgoutput messages (the event table's inserts, binary); whole
 *   transactions (up to their 'C') are buffered in memory, decoded and validated, from the
 *   confirmed position on. Reads are served from the
 *   buffer; `confirm` drops what it covers and sends a standby status update with flush = upTo,
 *   which is what moves the slot's `confirmed_flush_lsn`. Nothing else is ever reported flushed.
 * - Primary keepalives ('k') asking for a reply get a status update; one is also sent every
 *   `statusInterval`, so a relay that is not reading (backpressure) is not timed out by
 *   `wal_sender_timeout`.
 * - Backpressure: past `maxBufferedBytes` of whole unconfirmed transactions the socket is paused;
 *   confirms that bring it under half of that resume it.
 * - The lease: a session advisory lock taken on the same connection before START_REPLICATION
 *   (the SQL transport takes the same lock, so the two exclude each other), and the slot itself:
 *   a slot another walsender holds (SQLSTATE 55006) is `None`.
 * - A missing slot is a non-retriable `LogSourceError` saying how to create it: never created here.
 * - A lost connection fails every later call with a retriable `LogSourceError`.
 */
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { type LogLease, LogSourceError, type LogWindow } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import pg from "pg"
import * as LeaseLock from "./leaseLock.ts"
import { slotMissing } from "./logSetup.ts"
import * as Pgoutput from "./pgoutput.ts"

export interface Config {
  readonly slot: string
  /** The event table's unqualified name, as pgoutput names the relation. */
  readonly table: string
  /** The replication connection's settings, read at each connect (the password may be an effect). */
  readonly connection: Effect.Effect<Readonly<Record<string, unknown>>>
  readonly maxBufferedBytes: number
  /** Offer `readAfter` (reads come from memory: reading ahead only makes the next window staler). */
  readonly readAhead: boolean
  readonly statusInterval: Duration.Input
  readonly gauges: LogLease["gauges"]
  /** Whether the slot exists (over the pool), asked once the lock is held. */
  readonly exists: Effect.Effect<boolean, LogSourceError>
  /** Whether another session holds the lease now (over the pool), asked before connecting. */
  readonly held: Effect.Effect<boolean, LogSourceError>
}

interface Transaction {
  readonly entries: ReadonlyArray<LogMessage>
  readonly end: bigint
  readonly upTo: string
  readonly rows: number
  readonly bytes: number
}

// Permanent: wal_level, privileges, a missing slot, authentication.
const PERMANENT = new Set(["55000", "42501", "42704", "28000", "28P01", "3D000"])

const toError = (operation: string, error: unknown): LogSourceError => {
  const code = (error as { code?: unknown } | undefined)?.code
  const text = error instanceof Error ? error.message : String(error)
  return new LogSourceError({
    operation,
    reason: typeof code === "string" ? `${text} (SQLSTATE ${code})` : text,
    retriable: !(typeof code === "string" && PERMANENT.has(code))
  })
}

// Microseconds since 2000-01-01, the protocol's clock.
const PG_EPOCH_MS = 946_684_800_000

const statusUpdate = (position: bigint, replyRequested = false) => {
  const buffer = Buffer.alloc(34)
  buffer[0] = 0x72 // 'r'
  buffer.writeBigUInt64BE(position, 1) // written
  buffer.writeBigUInt64BE(position, 9) // flushed: the slot's confirmed_flush_lsn follows this
  buffer.writeBigUInt64BE(position, 17) // applied
  buffer.writeBigInt64BE(BigInt(Date.now() - PG_EPOCH_MS) * 1000n, 25)
  buffer[33] = replyRequested ? 1 : 0
  return buffer
}

const connect = (config: Config) =>
  Effect.acquireRelease(
    Effect.flatMap(config.connection, (settings) =>
      Effect.tryPromise({
        try: async () => {
          const client = new pg.Client({ ...settings, replication: "database" } as pg.ClientConfig)
          // A lost connection is reported to the lease through the copy stream's listeners; this
          // keeps an 'error' without a listener from crashing the process.
          client.on("error", () => undefined)
          await client.connect()
          return client
        },
        catch: (error) => toError("log.acquire", error)
      })
    ),
    (client) =>
      Effect.promise(() =>
        Promise.race([
          client.end().catch(() => undefined),
          new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref())
        ])
      ).pipe(Effect.andThen(released(config)))
  )

// The server's walsender outlives the socket by a moment: the lease ends with its scope once the
// server no longer holds it, so the next try (a standby's, or this process's) takes it. At most a
// second; a server that does not answer is not waited for (the next try retries anyway).
const released = (config: Config) =>
  config.held.pipe(
    Effect.orElseSucceed(() => false),
    Effect.repeat({ schedule: Schedule.spaced("20 millis"), while: (held) => held }),
    Effect.timeout("1 second"),
    Effect.ignore
  )

const query = (client: pg.Client, text: string) =>
  Effect.tryPromise({
    try: () => client.query(text).then((result) => result.rows as Array<Record<string, unknown>>),
    catch: (error) => toError("log.acquire", error)
  })

/** START_REPLICATION; `false` when another walsender holds the slot (55006). */
const startReplication = (client: pg.Client, text: string, onEnd: (error: unknown) => void) =>
  Effect.callback<boolean, LogSourceError>((resume) => {
    const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection
    let started = false
    connection.once("replicationStart", () => {
      started = true
      resume(Effect.succeed(true))
    })
    client.query(text).then(
      () => onEnd(new Error("the server ended the replication stream")),
      (error: unknown) => {
        if (started) return onEnd(error)
        const code = (error as { code?: unknown }).code
        resume(code === "55006" ? Effect.succeed(false) : Effect.fail(toError("log.acquire", error)))
      }
    )
  })

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

/** What `pg` keeps of the wire under its client (not in its types): the copy stream and the socket. */
interface WireConnection extends NodeJS.EventEmitter {
  readonly stream: { readonly pause: () => void; readonly resume: () => void }
  readonly sendCopyFromChunk: (chunk: Buffer) => void
}

/** The stream's state, shared by the frame handler and the lease. */
interface State {
  readonly config: Config
  readonly connection: WireConnection
  /** Whole transactions received after the confirmed position, in commit order. */
  readonly buffered: Array<Transaction>
  bufferedBytes: number
  paused: boolean
  confirmed: bigint
  /**
   * The server's sent position from its last keepalive: every transaction committed before it
   * has been received (an empty read may confirm up to it, so the slot moves past other WAL).
   */
  serverEnd: bigint
  lost: LogSourceError | undefined
  closed: boolean
  /**
   * Whether the stream has reached the WAL flushed when it started: until then a read from the
   * confirmed position may not hold every transaction committed before (the first window after a
   * takeover, which the relay probes, must be whole: see `caughtUp`).
   */
  caughtUp: boolean
  readonly catchUp: bigint
  bufferedRows: number
  readonly waiters: Set<() => void>
}

const wake = (state: State) => {
  const all = [...state.waiters]
  state.waiters.clear()
  for (const w of all) w()
}

const send = (state: State, buffer: Buffer) => {
  if (state.lost === undefined && !state.closed) state.connection.sendCopyFromChunk(buffer)
}

const lose = (state: State) => (cause: unknown) => {
  if (state.lost !== undefined || state.closed) return
  state.lost = new LogSourceError({
    operation: "log.stream",
    reason: `replication connection lost: ${toError("log.stream", cause).reason}`,
    retriable: true
  })
  wake(state)
}

/** Listens to the copy stream: buffers whole transactions, answers keepalives. */
const receive = (state: State) => {
  const { config, connection } = state
  // One decoder for the connection: the server describes a relation once per session.
  const decoder = Pgoutput.makeDecoder(config.table)
  // The transaction being received.
  let entries: Array<LogMessage> = []
  let rows = 0
  let bytes = 0

  const onPgoutput = (data: Buffer, frameBytes: number, at: () => string) => {
    const tag = data[0]
    rows++
    bytes += frameBytes
    if (tag === Pgoutput.TAG_COMMIT) {
      const end = Pgoutput.commitEnd(data)
      const upTo = Pgoutput.lsnText(end)
      for (let i = 0; i < entries.length; i++) entries[i] = { ...entries[i]!, position: upTo }
      state.buffered.push({ entries, end, upTo, rows, bytes })
      state.bufferedBytes += bytes
      state.bufferedRows += rows
      entries = []
      rows = 0
      bytes = 0
      if (!state.paused && state.bufferedBytes > config.maxBufferedBytes) {
        state.paused = true
        connection.stream.pause()
      }
      wake(state)
    } else {
      const entry = Pgoutput.change(decoder, data, at, rows)
      if (entry !== undefined) entries.push(entry)
    }
  }

  connection.on("copyData", (message: { chunk: Buffer }) => {
    const chunk = message.chunk
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

/** Whole transactions from `buffered[from]`, stopping after the one that reaches `maxEntries` rows. */
const windowFrom = (state: State, from: number, maxEntries: number): Effect.Effect<LogWindow, LogSourceError> => {
  const { buffered } = state
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
  if (state.paused && state.bufferedBytes <= state.config.maxBufferedBytes / 2) {
    state.paused = false
    state.connection.stream.resume()
  }
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
    awaitMore: (timeout) =>
      Effect.suspend(() => {
        const deadline = Date.now() + Duration.toMillis(Duration.fromInputUnsafe(timeout))
        // Woken by any signal (a commit, the catch-up, the loss): wait again unless there are events
        // to read. Transactions without events (DDL such as a new partition, other databases'
        // keepalives) do not wake the relay; it reads and confirms them after `timeout`.
        const loop: Effect.Effect<void, LogSourceError> = live(() =>
          state.buffered.some((t) => t.entries.length > 0) || Date.now() >= deadline
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
    paused: false,
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
    sendStatus: Effect.sync(() => send(state, statusUpdate(state.confirmed))),
    close: Effect.sync(() => {
      state.closed = true
      wake(state)
    })
  }
}

export const defaultStatusInterval = Duration.seconds(10)
