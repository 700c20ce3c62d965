/**
 * The runtime's long-running workers: the relays (each publication traced in its event's own
 * trace) and the declared consumers, each supervised (a consumer that stops on an error is
 * started again after a backoff instead of silently leaving its partitions unread).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Publisher } from "../../Publisher.ts"
import * as Relay from "../../Relay.ts"
import * as TracedPublisher from "../../TracedPublisher.ts"

/** Starts `instances` relays; returns them (lease owner ids and progress). */
export const startRelays = (settings: Partial<Relay.Settings> & { readonly instances: number }) =>
  Effect.gen(function* () {
    const { instances, ...relaySettings } = settings
    // Each event's publication is a span in the event's own trace (enqueue -> publish -> consume).
    const publisher = TracedPublisher.traced(yield* Publisher)
    const started: Array<Relay.Relay> = []
    for (let i = 0; i < instances; i++) {
      const owner =
        relaySettings.owner === undefined
          ? undefined
          : instances === 1
            ? relaySettings.owner
            : `${relaySettings.owner}-${i + 1}`
      const relay = yield* Relay.start({ ...relaySettings, ...(owner === undefined ? {} : { owner }) }).pipe(
        Effect.provideService(Publisher, publisher)
      )
      started.push(relay)
    }
    return started
  })

/** What supervision needs of a declared consumer. */
export interface Supervised<E extends { readonly message: string }, R> {
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly run: Effect.Effect<never, E, R>
}

const restartSchedule = (first: Duration.Duration) =>
  Schedule.exponential(first).pipe(
    Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.minutes(1))))
  )

/** Per consumer group: why it stopped while it waits to be restarted, `undefined` while it runs. */
export type ConsumerStates = Ref.Ref<ReadonlyMap<string, string | undefined>>

/**
 * Runs each consumer in the current scope, restarted after `restart` (doubling, capped at 1
 * minute); `states` follows each one for the health checks.
 */
export const superviseConsumers = <E extends { readonly message: string }, R>(
  declared: ReadonlyArray<Supervised<E, R>>,
  restart: Duration.Duration,
  states: ConsumerStates
): Effect.Effect<ReadonlyArray<string>, never, R | Scope.Scope> => {
  const mark = (groupId: string, stopped: string | undefined) =>
    Ref.update(states, (all) => new Map(all).set(groupId, stopped))
  return Effect.forEach(declared, (declaration) =>
    Effect.forkScoped(
      mark(declaration.groupId, undefined).pipe(
        Effect.andThen(declaration.run),
        Effect.tapError((error) =>
          Effect.logError(`consumer ${declaration.groupId} stopped, restarting: ${error.message}`).pipe(
            Effect.annotateLogs({ consumerGroup: declaration.groupId, topics: declaration.topics.join(",") }),
            Effect.andThen(mark(declaration.groupId, error.message))
          )
        ),
        Effect.retry(restartSchedule(restart))
      )
    ).pipe(Effect.as(declaration.groupId))
  )
}
