/**
 * The streaming transport's replication connection (`replication=database`, through `pg`): how
 * it is opened (with TCP keep-alive), how START_REPLICATION is sent, the standby status update,
 * and how the lease waits for the server to let go of it at the end.
 */
import { type LogLease, LogSourceError } from "@effect-outbox/core/LogSource"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import pg from "pg"

/** What the stream needs of its connection's settings and the pool. */
export interface ConnectionConfig {
  /** The replication connection's settings, read at each connect (the password may be an effect). */
  readonly connection: Effect.Effect<Readonly<Record<string, unknown>>>
  /** Whether another session holds the lease now (over the pool). */
  readonly held: Effect.Effect<boolean, LogSourceError>
}

// Permanent: wal_level, privileges, a missing slot, authentication.
const PERMANENT = new Set(["55000", "42501", "42704", "28000", "28P01", "3D000"])

export const toError = (operation: string, error: unknown): LogSourceError => {
  const code = (error as { code?: unknown } | undefined)?.code
  const text = error instanceof Error ? error.message : String(error)
  return new LogSourceError({
    operation,
    reason: typeof code === "string" ? `${text} (SQLSTATE ${code})` : text,
    retriable: !(typeof code === "string" && PERMANENT.has(code))
  })
}

/**
 * TCP keep-alive probes start after this long without traffic (then one a second, ten unanswered
 * end the socket: libuv's settings), well under `wal_sender_timeout`'s 60 s default: a peer that
 * vanished without a FIN (a dead host, a dropped route) ends the connection in about 20 s.
 */
export const KEEP_ALIVE_DELAY_MS = 10_000

// Microseconds since 2000-01-01, the protocol's clock.
const PG_EPOCH_MS = 946_684_800_000

/** A standby status update ('r'): written = flushed = applied = `position`. */
export const statusUpdate = (position: bigint, replyRequested = false) => {
  const buffer = Buffer.alloc(34)
  buffer[0] = 0x72 // 'r'
  buffer.writeBigUInt64BE(position, 1) // written
  buffer.writeBigUInt64BE(position, 9) // flushed: the slot's confirmed_flush_lsn follows this
  buffer.writeBigUInt64BE(position, 17) // applied
  buffer.writeBigInt64BE(BigInt(Date.now() - PG_EPOCH_MS) * 1000n, 25)
  buffer[33] = replyRequested ? 1 : 0
  return buffer
}

export const connect = (config: ConnectionConfig) =>
  Effect.acquireRelease(
    Effect.flatMap(config.connection, (settings) =>
      Effect.tryPromise({
        try: async () => {
          const client = new pg.Client({
            ...settings,
            replication: "database",
            keepAlive: true,
            keepAliveInitialDelayMillis: KEEP_ALIVE_DELAY_MS
          } as pg.ClientConfig)
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
const released = (config: ConnectionConfig) =>
  config.held.pipe(
    Effect.orElseSucceed(() => false),
    Effect.repeat({ schedule: Schedule.spaced("20 millis"), while: (held) => held }),
    Effect.timeout("1 second"),
    Effect.ignore
  )

export const query = (client: pg.Client, text: string) =>
  Effect.tryPromise({
    try: () => client.query(text).then((result) => result.rows as Array<Record<string, unknown>>),
    catch: (error) => toError("log.acquire", error)
  })

/** START_REPLICATION; `false` when another walsender holds the slot (55006). */
export const startReplication = (client: pg.Client, text: string, onEnd: (error: unknown) => void) =>
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

/** The streaming transport's settings: the connection, the slot and its table, the buffer and the server's silence limits. */
export interface Config extends ConnectionConfig {
  readonly slot: string
  /** The event table's unqualified name, as pgoutput names the relation. */
  readonly table: string
  readonly maxBufferedBytes: number
  /** Offer `readAfter` (reads come from memory: reading ahead only makes the next window staler). */
  readonly readAhead: boolean
  readonly statusInterval: Duration.Input
  /** Longest silence from the server, while the stream reads, before the connection counts as lost. */
  readonly silenceLimit: Duration.Input
  readonly gauges: LogLease["gauges"]
  /** Whether the slot exists (over the pool), asked once the lock is held. */
  readonly exists: Effect.Effect<boolean, LogSourceError>
}
