/**
 * An in-memory `LogSource`: committed transactions of events in commit order, a confirmed
 * position and one lease, for testing the log relay (`LogRelay`) without PostgreSQL. It behaves
 * like `PgLogSource`: reads do not consume (`readAfter` reads past an unconfirmed window), windows
 * end on transaction boundaries, `confirm` moves the position, `awaitMore` wakes on the next commit
 * (as the streaming transport does), the lease ends with the holder's scope (a killed relay's fiber
 * is interrupted).
 *
 * @since 0.1.0
 */
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { type LogLease, LogSource, LogSourceError } from "@effect-outbox/core/LogSource"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * @since 0.1.0
 * @category models
 */
export interface Log {
  readonly source: LogSource["Service"]
  /** Commits one transaction of events (appends them, in order, as one unit). */
  readonly commit: (messages: ReadonlyArray<LogMessage>) => Effect.Effect<void>
  /** Transactions confirmed so far, and committed so far. */
  readonly positions: Effect.Effect<{ readonly confirmed: number; readonly committed: number }>
  /** Whether some scope holds the lease. */
  readonly leased: Effect.Effect<boolean>
  /** The next `count` reads fail (a lost connection). */
  readonly failReads: (count: number) => Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Log> = Effect.sync(() => {
  const transactions: Array<ReadonlyArray<LogMessage>> = []
  let confirmed = 0
  let held = false
  let failing = 0
  const waiters = new Set<() => void>()

  // Whole transactions from `start`, stopping after the one that reaches maxEntries (as upto_nchanges),
  // each entry stamped with its transaction's position (as PgLogSource does).
  const windowFrom = (start: number, maxEntries: number) => {
    const entries: Array<LogMessage> = []
    let end = start
    while (end < transactions.length && entries.length < maxEntries) {
      const position = String(end + 1)
      for (const entry of transactions[end++]!) entries.push({ ...entry, position })
    }
    return { entries, upTo: end === start ? null : String(end), more: end < transactions.length }
  }

  const lease: LogLease = {
    read: (maxEntries) =>
      Effect.suspend(() => {
        if (failing > 0) {
          failing--
          return Effect.fail(
            new LogSourceError({ operation: "log.read", reason: "injected read fault", retriable: true })
          )
        }
        return Effect.succeed(windowFrom(confirmed, maxEntries))
      }),
    readAfter: (after, maxEntries) =>
      Effect.suspend(() => {
        if (failing > 0) {
          failing--
          return Effect.fail(
            new LogSourceError({ operation: "log.readAfter", reason: "injected read fault", retriable: true })
          )
        }
        return Effect.succeed(windowFrom(Number(after), maxEntries))
      }),
    confirm: (upTo) =>
      Effect.suspend(() => {
        const to = Number(upTo)
        if (!(to >= confirmed && to <= transactions.length)) {
          return Effect.fail(
            new LogSourceError({ operation: "log.confirm", reason: `cannot confirm ${upTo}`, retriable: false })
          )
        }
        confirmed = to
        return Effect.void
      }),
    awaitMore: (timeout) =>
      Effect.suspend(() => {
        if (transactions.slice(confirmed).some((t) => t.length > 0)) return Effect.void
        return Effect.callback<void>((resume) => {
          const done = () => {
            if (transactions.slice(confirmed).some((t) => t.length > 0)) resume(Effect.void)
            else waiters.add(done)
          }
          waiters.add(done)
          return Effect.sync(() => waiters.delete(done))
        }).pipe(Effect.timeoutOption(timeout), Effect.asVoid)
      }),
    gauges: Effect.sync(() => {
      const lag = transactions.slice(confirmed).reduce((n, t) => n + t.length, 0)
      return { lagBytes: lag, retainedBytes: lag }
    })
  }

  const source = LogSource.of({
    acquire: Effect.suspend(() => {
      if (held) return Effect.succeed(Option.none())
      held = true
      return Effect.as(
        Effect.addFinalizer(() =>
          Effect.sync(() => {
            held = false
          })
        ),
        Option.some(lease)
      )
    })
  })

  return {
    source,
    commit: (messages) =>
      Effect.sync(() => {
        transactions.push([...messages])
        const woken = [...waiters]
        waiters.clear()
        for (const wake of woken) wake()
      }),
    positions: Effect.sync(() => ({ confirmed, committed: transactions.length })),
    leased: Effect.sync(() => held),
    failReads: (count) =>
      Effect.sync(() => {
        failing += count
      })
  }
})

/**
 * @since 0.1.0
 * @category layers
 */
export const layerFrom = (log: Log): Layer.Layer<LogSource> => Layer.succeed(LogSource)(log.source)

/**
 * The log with a `LogWriter` that commits each `emit` as one transaction, and a `Transactor` that
 * runs its effect as is: the memory log has no rollback (an `emit` inside a transaction that
 * fails afterwards stays committed), unlike `PgLogSource`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithWriter = (log: Log): Layer.Layer<LogSource | LogWriter | Transactor> =>
  Layer.mergeAll(
    layerFrom(log),
    Layer.succeed(LogWriter)(LogWriter.of({ emit: (messages) => log.commit(messages) })),
    Layer.succeed(Transactor)(Transactor.of({ withTransaction: (effect) => effect }))
  )
