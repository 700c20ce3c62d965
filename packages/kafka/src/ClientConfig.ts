/**
 * The client settings every driver reads from the environment (`KAFKA_BROKERS`,
 * `KAFKA_CLIENT_ID`, and TLS/SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*`), a driver's
 * `layerConfig` built from them, and TLS and SASL settings in the shapes both clients take.
 *
 * @since 0.1.0
 */
import * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as KafkaVariables from "@effect-outbox/core/KafkaVariables"
import * as Config from "effect/Config"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"

/**
 * Reads `KAFKA_BROKERS` (comma separated, default `127.0.0.1:9092`) and `KAFKA_CLIENT_ID`
 * (default `effect-outbox`).
 *
 * @since 0.1.0
 * @category config
 */
export const config = Config.all({
  brokers: KafkaVariables.variables.brokers.config,
  clientId: KafkaVariables.variables.clientId.config
})

/**
 * What a driver's `layerConfig` takes: client options that win over the environment, and the
 * OAUTHBEARER token provider when `KAFKA_SASL_MECHANISM=oauthbearer` has no token file.
 *
 * @since 0.1.0
 * @category models
 */
export type Overrides<O> = Partial<O> & { readonly token?: KafkaSecurity.TokenProvider | undefined }

/**
 * What every driver's client options hold.
 *
 * @since 0.1.0
 * @category models
 */
export interface BaseOptions {
  readonly brokers: ReadonlyArray<string>
  readonly clientId?: string | undefined
  readonly security?: KafkaSecurity.Security | undefined
}

/**
 * A client layer from the environment, `overrides` taking precedence; `security` given in code
 * replaces the `KAFKA_SSL_*` / `KAFKA_SASL_*` variables.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig =
  <I, S, O extends BaseOptions>(
    service: Context.Key<I, S>,
    make: (options: O) => Effect.Effect<S, never, Scope.Scope>
  ) =>
  (overrides?: Overrides<O>): Layer.Layer<I, Config.ConfigError | KafkaSecurity.KafkaSecurityError> =>
    Layer.effect(service)(
      Effect.gen(function* () {
        const fromEnv = yield* config
        const { token, ...rest }: Overrides<O> = overrides ?? {}
        const security = rest.security ?? (yield* KafkaSecurity.config({ token }))
        return yield* make({ ...fromEnv, ...rest, security } as unknown as O)
      })
    )

/**
 * A driver's client layers: `layer` from options, and `layerConfig` (see {@link layerConfig}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layers = <I, S, O extends BaseOptions>(
  service: Context.Key<I, S>,
  make: (options: O) => Effect.Effect<S, never, Scope.Scope>
) => ({
  layer: (options: O): Layer.Layer<I> => Layer.effect(service)(make(options)),
  layerConfig: layerConfig(service, make)
})

/**
 * TLS settings as Node's TLS options, which both clients pass to `tls.connect`.
 *
 * @since 0.1.0
 * @category security
 */
export const tlsOptions = (tls: KafkaSecurity.Tls) => ({
  rejectUnauthorized: tls.rejectUnauthorized,
  ...(tls.ca.length > 0 ? { ca: [...tls.ca] } : {}),
  ...(tls.cert !== undefined ? { cert: tls.cert } : {}),
  ...(tls.key !== undefined ? { key: tls.key } : {}),
  ...(tls.keyPassword !== undefined ? { passphrase: Redacted.value(tls.keyPassword) } : {})
})

/**
 * SASL settings with the password revealed and the OAUTHBEARER token provider as a promise (the
 * client names the mechanism in its own spelling).
 *
 * @since 0.1.0
 * @category security
 */
export const saslOptions = (sasl: KafkaSecurity.Sasl) =>
  sasl.mechanism === "oauthbearer"
    ? { mechanism: sasl.mechanism, token: () => Effect.runPromise(sasl.token) }
    : { mechanism: sasl.mechanism, username: sasl.username, password: Redacted.value(sasl.password) }
