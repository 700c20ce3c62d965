/**
 * The client settings every driver reads from the environment (`KAFKA_BROKERS`,
 * `KAFKA_CLIENT_ID`), and a driver's `layerConfig` built from them.
 *
 * @since 0.4.0
 */
import * as KafkaVariables from "@effect-outbox/core/KafkaVariables"
import * as Config from "effect/Config"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"

/**
 * Reads `KAFKA_BROKERS` (comma separated, default `127.0.0.1:9092`) and `KAFKA_CLIENT_ID`
 * (default `effect-outbox`).
 *
 * @since 0.4.0
 * @category config
 */
export const config = Config.all({
  brokers: KafkaVariables.variables.brokers.config,
  clientId: KafkaVariables.variables.clientId.config
})

/**
 * A client layer from the environment, `overrides` taking precedence.
 *
 * @since 0.4.0
 * @category layers
 */
export const layerConfig =
  <I, S, O extends { readonly brokers: ReadonlyArray<string>; readonly clientId?: string | undefined }>(
    service: Context.Key<I, S>,
    make: (options: O) => Effect.Effect<S, never, Scope.Scope>
  ) =>
  (overrides?: Partial<O>): Layer.Layer<I, Config.ConfigError> =>
    Layer.effect(service)(
      Effect.gen(function* () {
        const fromEnv = yield* config
        return yield* make({ ...fromEnv, ...overrides } as O)
      })
    )
