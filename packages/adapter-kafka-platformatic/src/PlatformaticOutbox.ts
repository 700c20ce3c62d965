/**
 * Every broker port of effect-outbox on @platformatic/kafka: `Publisher`, `BrokerProbe`,
 * `BrokerAdmin`, `ConsumerSource` and `TopicReader`. A drop-in sibling of the kafkajs adapter's
 * `KafkaOutbox`: the same ports, the same `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` configuration.
 * `PlatformaticTransactionalProducer.layer({ transactionalId })` is separate, as with kafkajs: a
 * transactional id belongs to one pipeline instance.
 *
 * @example
 * ```ts
 * import { PlatformaticOutbox } from "@effect-outbox/adapter-kafka-platformatic"
 *
 * // was: const KafkaLive = KafkaOutbox.layerConfig()
 * const KafkaLive = PlatformaticOutbox.layerConfig()
 * ```
 *
 * @since 0.1.0
 */
import * as OutboxLayer from "@effect-outbox/kafka/OutboxLayer"
import * as PlatformaticBrokerAdmin from "./PlatformaticBrokerAdmin.ts"
import * as PlatformaticBrokerProbe from "./PlatformaticBrokerProbe.ts"
import * as PlatformaticClient from "./PlatformaticClient.ts"
import * as PlatformaticConsumerSource from "./PlatformaticConsumerSource.ts"
import * as PlatformaticPublisher from "./PlatformaticPublisher.ts"
import * as PlatformaticTopicReader from "./PlatformaticTopicReader.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type PlatformaticOutboxOptions = OutboxLayer.Options<
  PlatformaticPublisher.PlatformaticPublisherOptions,
  PlatformaticBrokerProbe.PlatformaticBrokerProbeOptions,
  PlatformaticBrokerAdmin.PlatformaticBrokerAdminOptions,
  PlatformaticConsumerSource.PlatformaticConsumerSourceOptions,
  PlatformaticTopicReader.PlatformaticTopicReaderOptions
>

/**
 * @since 0.1.0
 * @category models
 */
export type Services = OutboxLayer.Ports | PlatformaticClient.PlatformaticClient

/**
 * `layerWithoutClient`: the ports over a `PlatformaticClient` you provide. `layer`: with the
 * client built from its options. `layerConfig`: with the client read from `KAFKA_BROKERS` /
 * `KAFKA_CLIENT_ID` and TLS/SASL from `KAFKA_SSL_*` / `KAFKA_SASL_*` (`client.token`: the
 * OAUTHBEARER token provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const { layer, layerConfig, layerWithoutClient } = OutboxLayer.make({
  ports: (options: PlatformaticOutboxOptions) => ({
    publisher: PlatformaticPublisher.layer(options.publisher),
    probe: PlatformaticBrokerProbe.layer(options.probe),
    admin: PlatformaticBrokerAdmin.layer(options.admin),
    consumer: PlatformaticConsumerSource.layer(options.consumer),
    reader: PlatformaticTopicReader.layer(options.reader)
  }),
  client: PlatformaticClient.layer,
  clientConfig: PlatformaticClient.layerConfig
})

/**
 * @since 0.1.0
 * @category models
 * @deprecated Use `PlatformaticOutboxOptions`.
 */
export type PlatformaticKafkaOutboxOptions = PlatformaticOutboxOptions
