/**
 * The streaming transport's state, shared by its frame handler and its lease: the transactions
 * buffered from the confirmed position, the one being received, and the socket's backpressure.
 */
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { LogSourceError } from "@effect-outbox/core/LogSource"
import type { Config } from "./logConnection.ts"
import { toError } from "./logConnection.ts"

export interface Transaction {
  /** Its commit position (the 'B' message's), naming it in part windows. */
  readonly commit: bigint
  /** The events not released, from the transaction's `first`-th. */
  entries: ReadonlyArray<LogMessage>
  first: number
  readonly end: bigint
  readonly upTo: string
  readonly rows: number
  readonly bytes: number
}

/** The transaction being received. */
export interface Open {
  commit: bigint
  /** Its events not released yet, from its `first`-th; `sizes[i]` the frame bytes of `entries[i]`. */
  entries: Array<LogMessage>
  sizes: Array<number>
  first: number
  /** Events received so far (the next one's number). */
  count: number
  rows: number
  /** Frame bytes held: the entries' and the other messages'. */
  bytes: number
}

export const emptyOpen = (): Open => ({ commit: 0n, entries: [], sizes: [], first: 0, count: 0, rows: 0, bytes: 0 })

/** What `pg` keeps of the wire under its client (not in its types): the copy stream and the socket. */
export interface WireConnection extends NodeJS.EventEmitter {
  readonly stream: { readonly pause: () => void; readonly resume: () => void }
  readonly sendCopyFromChunk: (chunk: Buffer) => void
}

/** The stream's state, shared by the frame handler and the lease. */
export interface State {
  readonly config: Config
  readonly connection: WireConnection
  /** Whole transactions received after the confirmed position, in commit order. */
  readonly buffered: Array<Transaction>
  bufferedBytes: number
  /** The transaction being received (its `count` is 0 between transactions). */
  open: Open
  /** The part the relay released last: its events are dropped when the server sends them again. */
  released: { readonly commit: bigint; readonly done: number } | undefined
  paused: boolean
  confirmed: bigint
  /**
   * The server's sent position from its last keepalive: every transaction committed before it
   * has been received (an empty read may confirm up to it, so the slot moves past other WAL).
   */
  serverEnd: bigint
  /** When the server was last heard from (or the socket resumed): `Date.now()`. */
  heardAt: number
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

export const wake = (state: State) => {
  const all = [...state.waiters]
  state.waiters.clear()
  for (const w of all) w()
}

export const send = (state: State, buffer: Buffer) => {
  if (state.lost === undefined && !state.closed) state.connection.sendCopyFromChunk(buffer)
}

export const lose = (state: State) => (cause: unknown) => {
  if (state.lost !== undefined || state.closed) return
  state.lost = new LogSourceError({
    operation: "log.stream",
    reason: `replication connection lost: ${toError("log.stream", cause).reason}`,
    retriable: true
  })
  wake(state)
}

export const held = (state: State) => state.bufferedBytes + state.open.bytes

/** Pauses the socket past `maxBufferedBytes`; a part can then be read (the relay is woken). */
export const pauseIfFull = (state: State) => {
  if (state.paused || held(state) <= state.config.maxBufferedBytes) return
  state.paused = true
  state.connection.stream.pause()
  wake(state)
}

export const resumeIfRoom = (state: State) => {
  if (!state.paused || held(state) > state.config.maxBufferedBytes / 2) return
  state.paused = false
  state.heardAt = Date.now()
  state.connection.stream.resume()
}

/** A part can be read: nothing whole is buffered and the transaction being received filled the buffer. */
export const partReady = (state: State) => state.paused && state.buffered.length === 0 && state.open.entries.length > 0
