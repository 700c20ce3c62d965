/**
 * A PostgreSQL outage as the in-memory database plays it: each call fails with the error the
 * server and `@effect/sql-pg` really give at that moment (SQLSTATE and reason class as the
 * driver builds them), classified as adapter-pg classifies them, so the in-memory stores yield
 * exactly the `StoreError` the real adapter would. The rule is written here rather than imported so
 * that the fakes need no adapter; adapter-pg's tests check the parity on every outage phase.
 *
 * @internal
 */
import { StoreError } from "@effect-outbox/core/Errors"
import { ConnectionError, SqlError, UnknownError } from "effect/sql/SqlError"
import type * as Store from "./memoryStore.ts"

/**
 * - `"shutdown"`: `pg_ctl stop -m fast` in progress. New connections get `57P03` "the database
 *   system is shutting down"; open transactions are terminated (`57P01`).
 * - `"down"`: the server is gone. New connections are refused (`ECONNREFUSED`); open
 *   transactions lose their connection (`08006`).
 * - `"startup"`: the server is starting or recovering. New connections get `57P03` "the database
 *   system is starting up".
 * - `"crash"`: the server died or the network dropped without a word: like `"down"`.
 */
export type OutageMode = "shutdown" | "down" | "startup" | "crash"

/** How a `SqlError` becomes the port's error (adapter-pg's classification by default). */
export type SqlErrorMapping = (operation: string) => (error: SqlError) => StoreError

/** The SQLSTATE the driver kept on the PostgreSQL error, if any. */
const sqlState = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/**
 * adapter-pg's classification for the errors an outage produces: the reason names the driver's
 * class, the SQLSTATE and PostgreSQL's own message; a lost or refused connection (class 08) and a
 * server shutting down or starting up (57P01-3) are the database's failure (`unavailable`), as is
 * anything the driver marks retryable. adapter-pg owns the full SQLSTATE list.
 */
export const defaultMapping: SqlErrorMapping = (operation) => (error) => {
  const state = sqlState(error)
  const cause = error.reason.cause as { readonly message?: unknown } | undefined
  const detail =
    typeof cause?.message === "string" && cause.message !== error.message
      ? `${error.message}: ${cause.message}`
      : error.message
  const unavailable =
    error.isRetryable ||
    error.reason._tag === "ConnectionError" ||
    state?.startsWith("08") === true ||
    (state !== undefined && /^57P0[1-3]$/.test(state))
  return new StoreError({
    operation,
    reason: `${error.reason._tag}${state === undefined ? "" : ` (SQLSTATE ${state})`}: ${detail}`,
    kind: unavailable ? "unavailable" : "permanent",
    cause: error
  })
}

export interface OutageState {
  /** The current outage, if the server is not serving. */
  current: OutageMode | undefined
  /** Increases with every outage; a transaction begun before the latest one lost its connection. */
  epoch: number
  /** How the latest outage began: what its cut-off transactions hear. */
  cutMode: OutageMode
  /** Commits of cut-off transactions still to apply-then-fail (a lost acknowledgement). */
  lostCommitAcks: number
  mapping: SqlErrorMapping
  /** The epoch each transaction began in. */
  readonly begunIn: WeakMap<Store.Transaction, number>
}

export const makeState = (): OutageState => ({
  current: undefined,
  epoch: 0,
  cutMode: "down",
  lostCommitAcks: 0,
  mapping: defaultMapping,
  begunIn: new WeakMap()
})

/** Enters (or moves to another phase of) an outage; an outage's first phase cuts off open transactions. */
export const enter = (state: OutageState, mode: OutageMode, lostCommitAcks: number): void => {
  if (state.current === undefined) {
    state.epoch++
    state.cutMode = mode
    state.lostCommitAcks = lostCommitAcks
  } else state.lostCommitAcks += lostCommitAcks
  state.current = mode
}

/** A PostgreSQL error response as `@effect/sql-pg` keeps it: an Error carrying the fields. */
const serverError = (code: string, message: string, severity = "FATAL") =>
  Object.assign(new Error(message), { severity, code, message })

/** What opening a connection (or using a dropped pooled one) gives during the outage. */
export const connectError = (mode: OutageMode): SqlError => {
  switch (mode) {
    case "shutdown":
    case "startup": {
      const text = mode === "shutdown" ? "the database system is shutting down" : "the database system is starting up"
      // sql-pg classifies the startup ErrorResponse by SQLSTATE: 57P03 is no class it knows.
      return new SqlError({
        reason: new UnknownError({
          cause: serverError("57P03", text),
          message: "PgConnection: Failed to connect",
          operation: "connect"
        })
      })
    }
    case "down":
    case "crash":
      return new SqlError({
        reason: new ConnectionError({
          cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), {
            code: "ECONNREFUSED",
            errno: -111,
            syscall: "connect"
          }),
          message: "PgConnection: Failed to connect",
          operation: "connect"
        })
      })
  }
}

/** What the next statement (or COMMIT) of a transaction open when the outage began gives. */
export const cutOffError = (mode: OutageMode): SqlError =>
  mode === "shutdown"
    ? new SqlError({
        reason: new UnknownError({
          cause: serverError("57P01", "terminating connection due to administrator command"),
          message: "PgConnection: Query failed",
          operation: "query"
        })
      })
    : new SqlError({
        reason: new ConnectionError({
          cause: serverError("08006", "connection to server was lost", "ERROR"),
          message: "PgConnection: Connection closed",
          operation: "query"
        })
      })

/** The lost acknowledgement of a COMMIT the server wrote: the connection dropped before the answer. */
export const lostAckError = (): SqlError =>
  new SqlError({
    reason: new ConnectionError({
      cause: serverError("08006", "connection to server was lost", "ERROR"),
      message: "PgConnection: Connection closed",
      operation: "query"
    })
  })

const cutOff = (state: OutageState, tx: Store.Transaction | undefined) =>
  tx !== undefined && (state.begunIn.get(tx) ?? state.epoch) < state.epoch

/**
 * The error a call gets right now, if any: `tx` is the caller's open transaction. A transaction
 * begun before the latest outage lost its connection with the server (even once the server is
 * back); any other call needs a connection and gets the connect error while the server is out.
 */
export const errorFor = (
  state: OutageState,
  operation: string,
  tx: Store.Transaction | undefined
): StoreError | undefined => {
  if (cutOff(state, tx)) return state.mapping(operation)(cutOffError(state.cutMode))
  return state.current === undefined ? undefined : state.mapping(operation)(connectError(state.current))
}

/**
 * What happens to a COMMIT now: nothing special, refused (rolled back), or applied with a lost
 * acknowledgement (the server wrote it as the connection dropped).
 */
export const commitOutcome = (
  state: OutageState,
  tx: Store.Transaction
): { readonly _tag: "ok" } | { readonly _tag: "refused" | "lostAck"; readonly error: StoreError } => {
  if (cutOff(state, tx)) {
    if (state.lostCommitAcks > 0) {
      state.lostCommitAcks--
      return { _tag: "lostAck", error: state.mapping("commit")(lostAckError()) }
    }
    return { _tag: "refused", error: state.mapping("commit")(cutOffError(state.cutMode)) }
  }
  return state.current === undefined
    ? { _tag: "ok" }
    : { _tag: "refused", error: state.mapping("commit")(connectError(state.current)) }
}
