/**
 * The core `WakeUp` port on PostgreSQL. By default nothing is added to the business
 * commit: the wake-ups go out after it.
 *
 * - `notify` registers an effect that runs right after the enclosing transaction's `COMMIT`
 *   succeeded, and never on rollback (at once outside a transaction; `SqlClient.afterCommit`, or
 *   at the outer level of a `PgTransactor` transaction the transactor's own list): it
 *   signals the relays of this layer in process, and asks for one `NOTIFY` for relays in other
 *   processes. Those `NOTIFY`s are sent outside any transaction and coalesced: at most one per
 *   `notifyInterval` per layer (leading and trailing edge), carrying the layer's id as payload so
 *   its own listener ignores them.
 * - With `notifyInTransaction: true` (the old mode), `notify` runs `pg_notify(channel, '')` in
 *   the transaction: delivered on commit, dropped on rollback, folded by PostgreSQL. Its cost: a
 *   notifying transaction takes a database-wide lock at commit, which serialises concurrent
 *   writers (about half the write throughput, see `bench/JOURNAL.md`). A `PgTransactor`
 *   transaction that already queued it here skips the call. (An enqueue whose insert queued it,
 *   `PgOutboxStore` with `notify` on, reports `wakeUpQueued` and does not call `notify`.)
 * - `signals` shares ONE pooled connection in `LISTEN` among all its subscribers (every relay
 *   of the process built from this layer), opened when the first subscribes and held for the
 *   layer's life; each signal fans out to every subscriber (a connection per relay
 *   pinned the pool). It emits once on every (re)connect (notifications sent while it was down
 *   are lost, the signal makes the relay look), once per notification from elsewhere, once per
 *   commit of this layer that enqueued, and, while the connection is down, once per
 *   `fallbackPollInterval` until `LISTEN` succeeds again. It never fails.
 *
 * Polling (the relay's `pollInterval`) stays the fallback for every lost hint.
 *
 * @since 0.1.0
 */

import { PgClient } from "@effect/sql-pg/PgClient"
import type { StoreError } from "@effect-outbox/core/Errors"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import { run } from "./internal/errors.ts"
import { CurrentTransaction, afterCommit as registerAfterCommit } from "./internal/transaction.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Tell relays in other processes with `NOTIFY`. Default `true`; `false` leaves them to their
   * poll interval (relays of this layer are still signalled after each commit).
   */
  readonly notify?: boolean | undefined
  /**
   * The old mode: `NOTIFY` inside the enqueueing transaction (every relay woken through
   * `LISTEN`). Default `false`: it serialises concurrent commits.
   */
  readonly notifyInTransaction?: boolean | undefined
  /** At most one after-commit `NOTIFY` per this interval per layer. Default 50 ms. */
  readonly notifyInterval?: Duration.Input | undefined
  /** `LISTEN` for signals. Default `true`; `false` makes `signals` empty (relays poll). */
  readonly listen?: boolean | undefined
  /** While `LISTEN` is down, signal this often. Default 1 second. */
  readonly fallbackPollInterval?: Duration.Input | undefined
  /** When to try `LISTEN` again after the connection dropped. Default every second. */
  readonly reconnect?: Schedule.Schedule<unknown, unknown> | undefined
}

/**
 * The after-commit `NOTIFY` for relays in other processes, sent outside any transaction and
 * coalesced: at most one per `interval` (leading and trailing edge). Answers the request to make
 * after a commit. A short-lived process (the CLI's release) sends its last one when the layer
 * closes.
 */
const coalescedNotify = (
  sql: SqlClient.SqlClient,
  channel: string,
  self: string,
  interval: Duration.Duration,
  layerScope: Scope.Scope
) =>
  Effect.gen(function* () {
    // One pending request at most: requests during a send or the interval after it fold into one.
    const requests = yield* Queue.sliding<void>(1)
    let requested = 0
    let sent = 0
    const send = sql`SELECT pg_notify(${channel}::text, ${self})`.withoutTransform.pipe(
      Effect.catchCause((cause) =>
        Effect.logDebug("outbox wake-up: NOTIFY after commit failed; relays elsewhere poll", cause)
      )
    )
    yield* Effect.forkIn(
      Effect.forever(
        Queue.take(requests).pipe(
          // the callbacks of one commit (one per enqueue) arrive together: fold them into this send
          Effect.andThen(Effect.yieldNow),
          Effect.andThen(Queue.clear(requests)),
          Effect.andThen(
            Effect.suspend(() => {
              const upTo = requested
              return Effect.tap(send, () => Effect.sync(() => (sent = upTo)))
            })
          ),
          Effect.andThen(Effect.sleep(interval))
        )
      ),
      layerScope
    )
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => (requested > sent ? Effect.timeout(send, Duration.seconds(2)) : Effect.void)).pipe(
        Effect.ignore
      )
    )
    return Effect.suspend(() => {
      requested++
      return Queue.offer(requests, undefined)
    }).pipe(Effect.asVoid)
  })

/**
 * The signals of one `LISTEN` connection: one on every (re)connect, one per notification from
 * elsewhere (`self`'s own are skipped), and while `LISTEN` is down one per `fallback` until it is
 * back. Never fails.
 */
const listen = (
  pg: PgClient,
  channel: string,
  self: string,
  fallback: Duration.Duration,
  reconnect: Schedule.Schedule<unknown, unknown>
): Stream.Stream<void> =>
  Stream.unwrap(
    Effect.gen(function* () {
      // Only a failed LISTEN switches polling on; the first connect is not "down".
      const down = yield* Ref.make(false)
      const listening = Stream.unwrap(
        Effect.gen(function* () {
          const queue = yield* pg.listen(channel)
          yield* Ref.set(down, false)
          return Stream.fromQueue(queue).pipe(
            Stream.filter((notification) => notification.payload !== self),
            Stream.as(undefined),
            Stream.prepend([undefined])
          )
        })
      ).pipe(
        Stream.tapError((error) =>
          Ref.set(down, true).pipe(
            Effect.andThen(
              Effect.logWarning(
                `outbox wake-up: LISTEN ${channel} failed (${error.message}); polling every ${Duration.format(
                  fallback
                )} until it is back`
              )
            )
          )
        ),
        Stream.retry(reconnect)
      )
      const polling = Stream.tick(fallback).pipe(Stream.filterEffect(() => Ref.get(down)))
      return Stream.merge(listening, polling)
    })
  ).pipe(
    // Only a defect gets here (connection failures are retried above). Signals are a hint: go
    // quiet and let the relay's own poll interval carry on, but say so.
    Stream.catchCause((cause) =>
      Stream.fromEffect(Effect.logError("outbox wake-up stopped listening; relays fall back to polling", cause)).pipe(
        Stream.drain,
        Stream.concat(Stream.never)
      )
    )
  )

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient
    const t = yield* PgTables
    const fallback = Duration.fromInputUnsafe(options.fallbackPollInterval ?? Duration.seconds(1))
    const reconnect = options.reconnect ?? Schedule.spaced(Duration.seconds(1))

    const notifyInterval = Duration.fromInputUnsafe(options.notifyInterval ?? Duration.millis(50))
    const remote = options.notify !== false
    // Our own after-commit NOTIFYs carry this id; our listener ignores them (already signalled).
    const self = `wake-${crypto.randomUUID()}`
    const layerScope = yield* Effect.scope
    // Signals are hints: a slow subscriber loses surplus ones, never the latest.
    const hub = yield* PubSub.sliding<void>(16)

    const inTransaction = Effect.gen(function* () {
      const state = yield* CurrentTransaction
      if (state?.notified === true) return
      yield* sql`SELECT pg_notify(${t.channel}::text, '')`.withoutTransform
      if (state !== undefined) state.notified = true
    })

    // After-commit wake-ups: signal this layer's relays, and ask for one coalesced NOTIFY.
    const request = remote ? yield* coalescedNotify(sql, t.channel, self, notifyInterval, layerScope) : Effect.void
    const afterCommit: Effect.Effect<void> = PubSub.publish(hub, undefined).pipe(Effect.andThen(request))

    // After COMMIT succeeded (at once outside a transaction); dropped on rollback. Registered
    // once per transaction however many enqueues it holds. No span: it only registers a
    // callback, on every enqueue.
    const registered = registerAfterCommit(sql.transactionService, sql.afterCommit, afterCommit)
    const notify: Effect.Effect<void, StoreError> =
      remote && options.notifyInTransaction === true
        ? Effect.flatMap(Effect.serviceOption(sql.transactionService), (ambient) =>
            Option.isSome(ambient) ? inTransaction : registered
          ).pipe(run("wakeup.notify"))
        : registered

    const listener = listen(pg, t.channel, self, fallback, reconnect)

    // One listener for the layer, started by the first subscriber, fanned out through the hub.
    let started = false
    const startListener = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      return Effect.asVoid(
        Effect.forkIn(
          Stream.runForEach(listener, () => PubSub.publish(hub, undefined)),
          layerScope
        )
      )
    })
    const signals: Stream.Stream<void> =
      options.listen === false
        ? Stream.never
        : Stream.unwrap(
            Effect.gen(function* () {
              // Subscribe before the listener can publish its first (connect) signal.
              const subscription = yield* PubSub.subscribe(hub)
              yield* startListener
              return Stream.fromSubscription(subscription)
            })
          )

    return WakeUp.of({ notify, signals })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<WakeUp, never, SqlClient.SqlClient | PgClient | PgTables> =>
  Layer.effect(WakeUp)(make(options))
