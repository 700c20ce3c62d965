/**
 * Every broker port of effect-outbox on @platformatic/kafka: `Publisher`, `BrokerProbe`,
 * `BrokerAdmin`, `ConsumerSource` and `TopicReader`. A drop-in sibling of the kafkajs adapter's
 * `KafkaOutbox`: the same ports, the same `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` configuration.
 * `PlatformaticTransactionalProducer.layer({ transactionalId })` is separate, as with kafkajs: a
 * transactional id belongs to one pipeline instance.
 *
 * @example
 * ```ts
 * import { PlatformaticKafkaOutbox } from "@effect-outbox/adapter-kafka-platformatic"
 *
 * // was: const KafkaLive = KafkaOutbox.layerConfig()
 * const KafkaLive = PlatformaticKafkaOutbox.layerConfig()
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
export interface PlatformaticKafkaOutboxOptions {
  readonly publisher?: PlatformaticPublisher.PlatformaticPublisherOptions | undefined
  readonly probe?: PlatformaticBrokerProbe.PlatformaticBrokerProbeOptions | undefined
  readonly admin?: PlatformaticBrokerAdmin.PlatformaticBrokerAdminOptions | undefined
  readonly consumer?: PlatformaticConsumerSource.PlatformaticConsumerSourceOptions | undefined
  readonly reader?: PlatformaticTopicReader.PlatformaticTopicReaderOptions | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export type Services =
  | Publisher
  | BrokerProbe
  | BrokerAdmin
  | ConsumerSource
  | TopicReader
  | PlatformaticClient.PlatformaticClient

/**
 * The ports over a `PlatformaticClient` you provide.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithoutClient = (
  options: PlatformaticKafkaOutboxOptions = {}
): Layer.Layer<
  Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader,
  never,
  PlatformaticClient.PlatformaticClient
> =>
  Layer.mergeAll(
    PlatformaticPublisher.layer(options.publisher),
    PlatformaticBrokerProbe.layer(options.probe),
    PlatformaticBrokerAdmin.layer(options.admin),
    PlatformaticConsumerSource.layer(options.consumer),
    PlatformaticTopicReader.layer(options.reader)
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  client: PlatformaticClient.PlatformaticClientOptions,
  options: PlatformaticKafkaOutboxOptions = {}
): Layer.Layer<Services> => layerWithoutClient(options).pipe(Layer.provideMerge(PlatformaticClient.layer(client)))

/**
 * Like `layer`, with the client read from `KAFKA_BROKERS` / `KAFKA_CLIENT_ID` and TLS/SASL from
 * `KAFKA_SSL_*` / `KAFKA_SASL_*` (`client.token`: the OAUTHBEARER token provider).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: PlatformaticKafkaOutboxOptions & {
    readonly client?: Partial<PlatformaticClient.PlatformaticClientOptions> & {
      readonly token?: KafkaSecurity.TokenProvider | undefined
    }
  } = {}
): Layer.Layer<Services, Config.ConfigError | KafkaSecurity.KafkaSecurityError> =>
  layerWithoutClient(options).pipe(Layer.provideMerge(PlatformaticClient.layerConfig(options.client)))
