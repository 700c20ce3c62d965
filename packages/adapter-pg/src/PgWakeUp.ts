/**
 * The core `WakeUp` port on PostgreSQL (R1.6): `NOTIFY` in the enqueueing transaction, `LISTEN`
 * in the relays, polling when the listening connection is down.
 *
 * - `notify` runs `pg_notify(channel, '')` on the ambient transaction: PostgreSQL delivers it only
 *   on commit, drops it on rollback, and folds identical notifications of one transaction into
 *   one, so a transaction that enqueues many times still wakes relays once. A transaction (level)
 *   that already queued it, here or in a `PgOutboxStore` insert with `notify` on, skips the call.
 * - `signals` shares ONE pooled connection in `LISTEN` among all its subscribers (every relay
 *   of the process built from this layer), opened when the first subscribes and held for the
 *   layer's life; each signal fans out to every subscriber (review M6: a connection per relay
 *   pinned the pool). It emits once on every (re)connect (notifications sent while it was down
 *   are lost, the signal makes the relay look), once per notification, and, while the connection
 *   is down, once per `fallbackPollInterval` until `LISTEN` succeeds again. It never fails.
 *
 * The cost: every notifying transaction takes a database-wide lock at commit to append to the
 * notification queue, which serialises the commits of concurrent writers. `notify: false` removes
 * it (relays then find work at their poll interval); see `docs/postgres.md` for measured numbers.
 *
 * @since 0.1.0
 */
import { WakeUp } from "@effect-outbox/core/WakeUp"
import { PgClient } from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import { run } from "./internal/errors.ts"
import { alreadyNotified, currentLevel, markNotified } from "./internal/notified.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Send `NOTIFY` from `notify`. Default `true`; `false` makes `notify` free and wake-ups polling-only. */
  readonly notify?: boolean | undefined
  /** `LISTEN` for signals. Default `true`; `false` makes `signals` empty (relays poll). */
  readonly listen?: boolean | undefined
  /** While `LISTEN` is down, signal this often. Default 1 second. */
  readonly fallbackPollInterval?: Duration.Input | undefined
  /** When to try `LISTEN` again after the connection dropped. Default every second. */
  readonly reconnect?: Schedule.Schedule<unknown, unknown> | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient
    const t = yield* PgTables
    const fallback = Duration.fromInputUnsafe(options.fallbackPollInterval ?? Duration.seconds(1))
    const reconnect = options.reconnect ?? Schedule.spaced(Duration.seconds(1))

    const notify = options.notify === false ? Effect.void : Effect.gen(function*() {
      const level = yield* currentLevel(sql)
      // the insert of this transaction already queued it (PgOutboxStore `notify`)
      if (alreadyNotified(level)) return
      yield* sql`SELECT pg_notify(${t.channel}::text, '')`.withoutTransform
      markNotified(level)
    }).pipe(run("wakeup.notify"))

    const listener: Stream.Stream<void> = Stream.unwrap(
      Effect.gen(function*() {
        // Only a failed LISTEN switches polling on; the first connect is not "down".
        const down = yield* Ref.make(false)
        const listening = Stream.unwrap(Effect.gen(function*() {
          const queue = yield* pg.listen(t.channel)
          yield* Ref.set(down, false)
          return Stream.fromQueue(queue).pipe(Stream.as(undefined), Stream.prepend([undefined]))
        })).pipe(
          Stream.tapError((error) =>
            Ref.set(down, true).pipe(
              Effect.andThen(Effect.logWarning(
                `outbox wake-up: LISTEN ${t.channel} failed (${error.message}); polling every ${
                  Duration.format(fallback)
                } until it is back`
              ))
            )
          ),
          Stream.retry(reconnect)
        )
        const polling = Stream.tick(fallback).pipe(
          Stream.filterEffect(() => Ref.get(down))
        )
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

    // One listener for the layer, started by the first subscriber, fanned out through a hub.
    // Signals are hints: a slow subscriber loses surplus ones, never the latest.
    const layerScope = yield* Effect.scope
    const hub = yield* PubSub.sliding<void>(16)
    let started = false
    const startListener = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      return Effect.asVoid(Effect.forkIn(Stream.runForEach(listener, () => PubSub.publish(hub, undefined)), layerScope))
    })
    const signals: Stream.Stream<void> = options.listen === false ? Stream.never : Stream.unwrap(
      Effect.gen(function*() {
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
