/**
 * The @platformatic/kafka clients every layer shares: one `Admin`, and one group-less `Consumer`
 * used only for offset lookups (it never joins a group). Producers and group consumers are made
 * per use from `baseOptions`.
 *
 * @since 0.1.0
 */

import * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as ClientConfig from "@effect-outbox/kafka/ClientConfig"
import { Admin, type BaseOptions, Consumer } from "@platformatic/kafka"
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

// @platformatic/kafka's declarations read Node's fetch option `RequestInit["dispatcher"]`. With the
// DOM lib (TypeScript's default) `RequestInit` is the browser's, without that field, and they fail
// to compile unless skipLibCheck is on: the field is declared here. Without the DOM lib @types/node
// already declares it, as undici's `Dispatcher`, and the `any` here only has to agree with it (an
// import of undici-types could be a different copy than @types/node's, and would not).
declare global {
  interface RequestInit {
    dispatcher?: NodeFetchDispatcher
  }
}
// biome-ignore lint/suspicious/noExplicitAny: must be assignable to whichever undici copy @types/node uses
type NodeFetchDispatcher = typeof globalThis extends { onmessage: any } ? unknown : any

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticClientOptions {
  /** `host:port` of at least one broker. */
  readonly brokers: ReadonlyArray<string>
  readonly clientId?: string | undefined
  /** Milliseconds a connection or request may take (client default 5000). */
  readonly timeout?: number | undefined
  /** Retries of one client call (client default 3). */
  readonly retries?: number | undefined
  /** TLS and SASL (`KafkaSecurity.config()` reads them from `KAFKA_SSL_*` / `KAFKA_SASL_*`). */
  readonly security?: KafkaSecurity.Security | undefined
  /** Anything else the client accepts; `security` wins over tls/sasl here. */
  readonly clientOptions?: Partial<Omit<BaseOptions, "bootstrapBrokers" | "clientId">> | undefined
}

/**
 * @since 0.1.0
 * @category services
 */
export class PlatformaticClient extends Context.Service<
  PlatformaticClient,
  {
    readonly admin: Admin
    /** Never joins its group: `listOffsets` / `listOffsetsWithTimestamps` only. */
    readonly offsets: Consumer
    readonly clientId: string
    readonly brokers: ReadonlyArray<string>
    /** What a new producer or consumer is built from. */
    readonly baseOptions: BaseOptions
  }
>()("@effect-outbox/adapter-kafka-platformatic/PlatformaticClient") {}

const mechanisms = {
  plain: "PLAIN",
  "scram-sha-256": "SCRAM-SHA-256",
  "scram-sha-512": "SCRAM-SHA-512",
  oauthbearer: "OAUTHBEARER"
} as const

/** TLS and SASL as the client's `tls` and `sasl`. */
const platformaticSecurity = ({ sasl, tls }: KafkaSecurity.Security): Pick<BaseOptions, "tls" | "sasl"> => ({
  ...(tls && { tls: ClientConfig.tlsOptions(tls) }),
  ...(sasl && { sasl: { ...ClientConfig.saslOptions(sasl), mechanism: mechanisms[sasl.mechanism] } })
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticClientOptions
): Effect.Effect<PlatformaticClient["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const clientId = options.clientId ?? "effect-outbox"
    const baseOptions: BaseOptions = {
      ...options.clientOptions,
      ...(options.security === undefined ? {} : platformaticSecurity(options.security)),
      clientId,
      bootstrapBrokers: [...options.brokers],
      retries: options.retries ?? 3,
      retryDelay: 250,
      timeout: options.timeout ?? 5_000
    }
    // Connections are lazy: a broker that is down at startup fails the first call, not the layer.
    const admin = yield* Effect.acquireRelease(
      Effect.sync(() => new Admin(baseOptions)),
      (admin) => Effect.promise(() => admin.close().catch(() => undefined))
    )
    const offsets = yield* Effect.acquireRelease(
      Effect.sync(() => new Consumer({ ...baseOptions, groupId: `${clientId}-offsets` })),
      (consumer) => Effect.promise(() => consumer.close(true).catch(() => undefined))
    )
    const secured = KafkaSecurity.describe(options.security ?? KafkaSecurity.plaintext)
    yield* Effect.logDebug(`@platformatic/kafka client ${clientId} for ${options.brokers.join(",")} (${secured})`)
    return PlatformaticClient.of({ admin, offsets, clientId, brokers: options.brokers, baseOptions })
  })

/**
 * Reads `KAFKA_BROKERS` (comma separated, default `127.0.0.1:9092`) and `KAFKA_CLIENT_ID`
 * (default `effect-outbox`), like the kafkajs adapter; `layerConfig` adds TLS and SASL from
 * `KAFKA_SSL_*` / `KAFKA_SASL_*`.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<PlatformaticClientOptions> = ClientConfig.config

/**
 * `layer`: the client from its options. `layerConfig`: the client from `config`, with TLS and
 * SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*`, `overrides` winning over both.
 *
 * @since 0.1.0
 * @category layers
 */
export const { layer, layerConfig } = ClientConfig.layers(PlatformaticClient, make)
