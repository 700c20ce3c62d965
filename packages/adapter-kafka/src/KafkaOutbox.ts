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
import * as OutboxLayer from "@effect-outbox/kafka/OutboxLayer"
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

/**
 * `layerWithoutClient`: the ports over a `KafkaClient` you provide. `layer`: with the client
 * built from its options. `layerConfig`: with the client read from `KAFKA_BROKERS` /
 * `KAFKA_CLIENT_ID` and TLS/SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*` (`client.token`: the
 * OAUTHBEARER token provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const { layer, layerConfig, layerWithoutClient } = OutboxLayer.make({
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
