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
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import type * as ClientConfig from "@effect-outbox/kafka/ClientConfig"
import * as OutboxLayer from "@effect-outbox/kafka/OutboxLayer"
import type * as Config from "effect/Config"
import type * as Layer from "effect/Layer"
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
export type KafkaOutboxOptions = OutboxLayer.Options<
  KafkaPublisher.KafkaPublisherOptions,
  KafkaBrokerProbe.KafkaBrokerProbeOptions,
  KafkaBrokerAdmin.KafkaBrokerAdminOptions,
  KafkaConsumerSource.KafkaConsumerSourceOptions,
  KafkaTopicReader.KafkaTopicReaderOptions
>

/**
 * @since 0.1.0
 * @category models
 */
export type Services = OutboxLayer.Ports | KafkaClient.KafkaClient

const outbox = OutboxLayer.make({
  ports: (options: KafkaOutboxOptions) => ({
    publisher: KafkaPublisher.layer(options.publisher),
    probe: KafkaBrokerProbe.layer(options.probe),
    admin: KafkaBrokerAdmin.layer(options.admin),
    consumer: KafkaConsumerSource.layer(options.consumer),
    reader: KafkaTopicReader.layer(options.reader)
  }),
  client: KafkaClient.layer,
  clientConfig: KafkaClient.layerConfig
})

/**
 * The ports over a `KafkaClient` you provide.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithoutClient: (
  options?: KafkaOutboxOptions
) => Layer.Layer<OutboxLayer.Ports, never, KafkaClient.KafkaClient> = outbox.layerWithoutClient

/**
 * @since 0.1.0
 * @category layers
 */
export const layer: (client: KafkaClient.KafkaClientOptions, options?: KafkaOutboxOptions) => Layer.Layer<Services> =
  outbox.layer

/**
 * Like `layer`, with the client read from `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` and TLS/SASL from
 * `KAFKA_SSL_*` / `KAFKA_SASL_*` (`client.token`: the OAUTHBEARER token provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: (
  options?: KafkaOutboxOptions & { readonly client?: ClientConfig.Overrides<KafkaClient.KafkaClientOptions> }
) => Layer.Layer<Services, Config.ConfigError | KafkaSecurity.KafkaSecurityError> = outbox.layerConfig
