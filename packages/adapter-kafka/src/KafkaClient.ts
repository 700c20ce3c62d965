/**
 * The kafkajs client every Kafka layer shares: one `Kafka` instance, one connected admin, and
 * kafkajs's own logging routed into Effect's logger.
 *
 * @since 0.1.0
 */
import * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as ClientConfig from "@effect-outbox/kafka/ClientConfig"
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import Kafkajs from "kafkajs"
import { effectLevel, onceAMinute } from "./internal/logLevels.ts"
import { describe } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaClientOptions {
  /** `host:port` of at least one broker. */
  readonly brokers: ReadonlyArray<string>
  readonly clientId?: string | undefined
  /** Milliseconds to establish a connection (kafkajs default 1000). */
  readonly connectionTimeout?: number | undefined
  /** Milliseconds a broker request may take (kafkajs default 30000). */
  readonly requestTimeout?: number | undefined
  /** TLS and SASL (`KafkaSecurity.config()` reads them from `KAFKA_SSL_*` / `KAFKA_SASL_*`). */
  readonly security?: KafkaSecurity.Security | undefined
  /**
   * Anything else kafkajs accepts (retry…; the publisher's producers use `publishingRetry`
   * instead); `logCreator` is always ours, `security` wins over ssl/sasl here.
   */
  readonly kafkaConfig?: Partial<Omit<Kafkajs.KafkaConfig, "brokers" | "clientId" | "logCreator">> | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export class KafkaClient extends Context.Service<
  KafkaClient,
  {
    readonly kafka: Kafkajs.Kafka
    /** A connected admin client, shared by the admin, the publisher's metadata cache and the probe. */
    readonly admin: Kafkajs.Admin
    readonly clientId: string
    readonly brokers: ReadonlyArray<string>
    /**
     * The same settings, but connecting only once per call: kafkajs retries a failed connection
     * (a certificate it does not trust among them) inside its cluster for seconds, whatever a
     * call's own `retry` says. The start-up check asks through it and bounds the wait itself.
     */
    readonly askOnce?: Kafkajs.Kafka | undefined
    /**
     * An admin on `askOnce` for the publisher's metadata reads: kafkajs retries a topic's metadata
     * for about ten seconds while one of its partitions has no leader; the publisher answers that
     * at once with the last good layout instead.
     */
    readonly metadataAdmin?: Kafkajs.Admin | undefined
    /**
     * The same settings with a short cluster retry (`publishingRetry`), for the publisher's
     * producers. A send refused because its partition's leader is away makes kafkajs re-read the
     * cluster's metadata, which fails for as long as that partition has no leader; on the
     * cluster's default retry that read is retried for 6 to 13 s before the send answers, and
     * every batch holding a record for that partition waits with it, the served partitions'
     * records included.
     */
    readonly publishing?: Kafkajs.Kafka | undefined
  }
>()("@effect-outbox/adapter-kafka/KafkaClient") {}

/** TLS and SASL as kafkajs's `ssl` and `sasl`. */
const kafkajsSecurity = ({ sasl, tls }: KafkaSecurity.Security): Pick<Kafkajs.KafkaConfig, "ssl" | "sasl"> => {
  const auth = sasl && ClientConfig.saslOptions(sasl)
  const oauth = auth && "token" in auth ? auth.token : undefined
  return {
    ...(tls && { ssl: ClientConfig.tlsOptions(tls) }),
    ...(auth && {
      sasl: (oauth
        ? { mechanism: "oauthbearer", oauthBearerProvider: async () => ({ value: await oauth() }) }
        : auth) as Kafkajs.SASLOptions
    })
  }
}

/**
 * The cluster retry of the publisher's producers (`publishing`): a connection to another seed
 * broker, or a metadata read during a leader election, is tried twice more, 100 ms and then
 * about 200 ms later. Past that a send to a partition without a leader fails as unavailable, and
 * the relay backs off that partition alone while the others go on. The producer's own `retry`
 * (`KafkaPublisher`) still retries a send whose metadata read succeeds (a leader that moved).
 *
 * @since 0.1.0
 * @category models
 */
export const publishingRetry: Kafkajs.RetryOptions = { retries: 2, initialRetryTime: 100, maxRetryTime: 1_000 }

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: KafkaClientOptions): Effect.Effect<KafkaClient["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const context = yield* Effect.context<never>()
    const run = Effect.runForkWith(context)
    const clientId = options.clientId ?? "effect-outbox"
    const once = onceAMinute()
    const logCreator: Kafkajs.logCreator =
      () =>
      ({ namespace, level, log }) => {
        const { message, timestamp: _timestamp, logger: _logger, ...rest } = log
        const text = String(message)
        run(
          Effect.logWithLevel(once(effectLevel(level, namespace, text), namespace, text))(
            `kafkajs ${namespace}: ${text}`
          ).pipe(Effect.annotateLogs({ kafkajs: namespace, ...rest }))
        )
      }
    const settings: Kafkajs.KafkaConfig = {
      ...options.kafkaConfig,
      ...(options.security === undefined ? {} : kafkajsSecurity(options.security)),
      clientId,
      brokers: [...options.brokers],
      logLevel: Kafkajs.logLevel.INFO,
      logCreator,
      ...(options.connectionTimeout === undefined ? {} : { connectionTimeout: options.connectionTimeout }),
      ...(options.requestTimeout === undefined ? {} : { requestTimeout: options.requestTimeout })
    }
    const kafka = new Kafkajs.Kafka(settings)
    const askOnce = new Kafkajs.Kafka({ ...settings, retry: { retries: 0 } })
    const publishing = new Kafkajs.Kafka({ ...settings, retry: publishingRetry })
    // Not connected here: kafkajs connects on first use. Building the layer never waits on a
    // broker (kafkajs would retry a refused connection for about ten seconds); the runtime's
    // start-up check (`OUTBOX_BROKER_STARTUP_TIMEOUT`) is where an unreachable broker fails.
    const admin = yield* Effect.acquireRelease(
      Effect.sync(() => kafka.admin()),
      (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
    )
    const metadataAdmin = yield* Effect.acquireRelease(
      Effect.sync(() => askOnce.admin()),
      (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
    )
    const secured = KafkaSecurity.describe(options.security ?? KafkaSecurity.plaintext)
    yield* Effect.logDebug(`kafka client ${clientId} for ${options.brokers.join(",")} (${secured})`)
    return KafkaClient.of({ kafka, admin, clientId, brokers: options.brokers, askOnce, metadataAdmin, publishing })
  })

/**
 * Reads `KAFKA_BROKERS` (comma separated, default `127.0.0.1:9092`) and `KAFKA_CLIENT_ID`
 * (default `effect-outbox`); `layerConfig` adds TLS and SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<KafkaClientOptions> = ClientConfig.config

/**
 * `layer`: the client from its options. `layerConfig`: the client from `config`, with TLS and
 * SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*`, `overrides` winning over both.
 *
 * @since 0.1.0
 * @category layers
 */
export const { layer, layerConfig } = ClientConfig.layers(KafkaClient, make)

/**
 * Runs a kafkajs call, mapping a rejection with `onError`.
 *
 * @since 0.1.0
 * @category utils
 */
export const attempt = <A, E>(thunk: () => Promise<A>, onError: (error: unknown) => E): Effect.Effect<A, E> =>
  Effect.tryPromise({ try: thunk, catch: onError })

/**
 * @since 0.1.0
 * @category utils
 */
export const describeError = describe
