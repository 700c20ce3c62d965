/**
 * Every broker port of effect-outbox on one kafkajs client: `Publisher`, `BrokerProbe`,
 * `BrokerAdmin`, `ConsumerSource` and `TopicReader`.
 *
 * @example
 * ```ts
 * import { KafkaOutbox } from "@effect-outbox/adapter-kafka"
 *
 * // KAFKA_BROKERS=broker-1:9092,broker-2:9092
 * const KafkaLive = KafkaOutbox.layerConfig()
 * ```
 *
 * @since 0.1.0
 */

import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import type * as Config from "effect/Config"
import * as Layer from "effect/Layer"
import * as KafkaBrokerAdmin from "./KafkaBrokerAdmin.ts"
import * as KafkaBrokerProbe from "./KafkaBrokerProbe.ts"
import * as KafkaClient from "./KafkaClient.ts"
import * as KafkaConsumerSource from "./KafkaConsumerSource.ts"
import * as KafkaPublisher from "./KafkaPublisher.ts"
import * as KafkaTopicReader from "./KafkaTopicReader.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaOutboxOptions {
  readonly publisher?: KafkaPublisher.KafkaPublisherOptions | undefined
  readonly probe?: KafkaBrokerProbe.KafkaBrokerProbeOptions | undefined
  readonly admin?: KafkaBrokerAdmin.KafkaBrokerAdminOptions | undefined
  readonly consumer?: KafkaConsumerSource.KafkaConsumerSourceOptions | undefined
  readonly reader?: KafkaTopicReader.KafkaTopicReaderOptions | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type Services = Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader | KafkaClient.KafkaClient

/**
 * The ports over a `KafkaClient` you provide.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithoutClient = (
  options: KafkaOutboxOptions = {}
): Layer.Layer<Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader, never, KafkaClient.KafkaClient> =>
  Layer.mergeAll(
    KafkaPublisher.layer(options.publisher),
    KafkaBrokerProbe.layer(options.probe),
    KafkaBrokerAdmin.layer(options.admin),
    KafkaConsumerSource.layer(options.consumer),
    KafkaTopicReader.layer(options.reader)
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  client: KafkaClient.KafkaClientOptions,
  options: KafkaOutboxOptions = {}
): Layer.Layer<Services> => layerWithoutClient(options).pipe(Layer.provideMerge(KafkaClient.layer(client)))

/**
 * Like `layer`, with the client read from `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` and TLS/SASL from
 * `KAFKA_SSL_*` / `KAFKA_SASL_*` (`client.token`: the OAUTHBEARER token provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: KafkaOutboxOptions & {
    readonly client?: Partial<KafkaClient.KafkaClientOptions> & {
      readonly token?: KafkaSecurity.TokenProvider | undefined
    }
  } = {}
): Layer.Layer<Services, Config.ConfigError | KafkaSecurity.KafkaSecurityError> =>
  layerWithoutClient(options).pipe(Layer.provideMerge(KafkaClient.layerConfig(options.client)))
