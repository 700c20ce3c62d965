/**
 * The relay's heartbeat: while it runs, it tells the store every few seconds that it is alive
 * (`OutboxStore.relayHeartbeat`, expiry by the store's clock), so an operator's view in another
 * process can tell "no relay is running" from "a backlog". A graceful stop ends it at once; a
 * crashed or frozen relay's heartbeat expires. Stores without heartbeats are left alone.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { OutboxStore } from "../../OutboxStore.ts"

/** How often a running relay writes its heartbeat. */
export const interval = Duration.seconds(10)

/** How long one heartbeat counts: three intervals, so one slow write does not read as a dead relay. */
export const ttl = Duration.seconds(30)

/** Beats for `owner` for the life of the scope; a failed write is retried at the next beat. */
export const start = (owner: string) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const beat = store.relayHeartbeat
    if (beat === undefined) return
    const write = (ttlMillis: number) =>
      beat({ owner, ttlMillis }).pipe(
        Effect.timeout(interval),
        Effect.catch((error) => Effect.logDebug(`outbox relay ${owner}: heartbeat not written: ${String(error)}`))
      )
    yield* Effect.addFinalizer(() => write(0))
    yield* Effect.forkScoped(write(Duration.toMillis(ttl)).pipe(Effect.repeat(Schedule.spaced(interval))))
  })
