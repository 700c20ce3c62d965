/**
 * What differs between the engines inside `OutboxRuntime`: where `Outbox` writes (the outbox
 * table, or the log through `LogWriter`), which relay runs (claim relays, or the log relay), and
 * what consumers do with the lifecycle of a row (nothing on the log engine: it has no rows).
 *
 * The log engine's services are looked up when the runtime starts, not required by its type: the
 * engine is configuration, and the claim engine's compositions must not have to provide them.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as LogOutbox from "../../LogOutbox.ts"
import * as LogRelay from "../../LogRelay.ts"
import { LogSource } from "../../LogSource.ts"
import { LogWriter } from "../../LogWriter.ts"
import * as Outbox from "../../Outbox.ts"
import { type Engine, LogEngineUnavailableError } from "../../OutboxEngine.ts"
import { Publisher } from "../../Publisher.ts"
import * as TracedPublisher from "../../TracedPublisher.ts"
import { Transactor } from "../../Transactor.ts"
import { NoOutboxRows } from "../consumer/options.ts"

/** The `Outbox` of `engine`: the claim engine's on `OutboxStore`, the log's on `LogWriter`. */
export const outboxLayer = (engine: Engine, settings: Outbox.Settings) =>
  engine === "claim"
    ? Outbox.layerWith(settings)
    : Layer.effect(Outbox.Outbox)(
        Effect.gen(function* () {
          const writer = yield* Effect.serviceOption(LogWriter)
          const source = yield* Effect.serviceOption(LogSource)
          const missing = [
            ...(Option.isNone(writer) ? ["LogWriter"] : []),
            ...(Option.isNone(source) ? ["LogSource"] : [])
          ]
          if (Option.isNone(writer) || missing.length > 0) {
            return yield* new LogEngineUnavailableError({ missing })
          }
          return yield* LogOutbox.make(settings).pipe(
            Effect.provideService(LogWriter, writer.value),
            Effect.provideService(Transactor, yield* Transactor)
          )
        })
      )

/** The lease owner the runtime reports for its log relay. */
export const logRelayOwner = "log-relay"

/**
 * Forks the log relay for the life of the scope, each event's publication traced in its own
 * trace as the claim relays' are. `outboxLayer` checked that `LogSource` is there.
 */
export const startLogRelay = (settings: LogRelay.Settings) =>
  Effect.gen(function* () {
    const publisher = TracedPublisher.traced(yield* Publisher)
    const source = yield* Effect.serviceOption(LogSource)
    if (Option.isNone(source)) return yield* new LogEngineUnavailableError({ missing: ["LogSource"] })
    yield* Effect.forkScoped(
      LogRelay.run(settings).pipe(
        Effect.provideService(Publisher, publisher),
        Effect.provideService(LogSource, source.value)
      )
    )
    return [logRelayOwner]
  })

/** A consumer's run on `engine`: on the log engine its lifecycle step is skipped. */
export const consumerRun = <A, E, R>(engine: Engine, run: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  engine === "log" ? Effect.provideService(run, NoOutboxRows, true) : run
