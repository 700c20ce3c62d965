/**
 * `@effect-outbox/adapter-kafka-platformatic`: the Kafka layers on @platformatic/kafka, one
 * namespace per module.
 *
 * @since 0.1.0
 */
export * as PlatformaticBrokerAdmin from "./PlatformaticBrokerAdmin.ts"
export * as PlatformaticBrokerProbe from "./PlatformaticBrokerProbe.ts"
export * as PlatformaticClient from "./PlatformaticClient.ts"
export * as PlatformaticConsumerSource from "./PlatformaticConsumerSource.ts"
export * as PlatformaticErrors from "./PlatformaticErrors.ts"
/**
 * @since 0.1.0
 * @deprecated Use `PlatformaticOutbox`.
 */
export * as PlatformaticKafkaOutbox from "./PlatformaticKafkaOutbox.ts"
export * as PlatformaticOutbox from "./PlatformaticOutbox.ts"
export * as PlatformaticPublisher from "./PlatformaticPublisher.ts"
export * as PlatformaticRetry from "./PlatformaticRetry.ts"
export * as PlatformaticTopicReader from "./PlatformaticTopicReader.ts"
export * as PlatformaticTransactionalProducer from "./PlatformaticTransactionalProducer.ts"
