/**
 * `@effect-outbox/adapter-kafka`: the Kafka layers on kafkajs, one namespace per module.
 *
 * @since 0.1.0
 */
export * as KafkaBrokerAdmin from "./KafkaBrokerAdmin.ts"
export * as KafkaBrokerProbe from "./KafkaBrokerProbe.ts"
export * as KafkaClient from "./KafkaClient.ts"
export * as KafkaConsumerSource from "./KafkaConsumerSource.ts"
export * as KafkaErrors from "./KafkaErrors.ts"
export * as KafkaOutbox from "./KafkaOutbox.ts"
export * as KafkaPublisher from "./KafkaPublisher.ts"
export * as KafkaRetry from "./KafkaRetry.ts"
export * as KafkaTopicReader from "./KafkaTopicReader.ts"
export * as KafkaTransactionalProducer from "./KafkaTransactionalProducer.ts"
