/**
 * `@effect-outbox/kafka`: the Kafka layer both client drivers share (protocol verdicts, the
 * driver seam, publisher machinery, admin, commit filter, group subscription, topic reader,
 * metrics, the all-in-one layer), one namespace per module.
 *
 * @since 0.1.0
 */
export * as Admin from "./Admin.ts"
export * as BatchHandoff from "./BatchHandoff.ts"
export * as BrokerRetry from "./BrokerRetry.ts"
export * as ClientConfig from "./ClientConfig.ts"
export * as CommitFilter from "./CommitFilter.ts"
export * as ConsumerOptions from "./ConsumerOptions.ts"
export * as GroupSubscription from "./GroupSubscription.ts"
export * as HeldBatches from "./HeldBatches.ts"
export * as KafkaDriver from "./KafkaDriver.ts"
export * as KafkaProtocol from "./KafkaProtocol.ts"
export * as Layouts from "./Layouts.ts"
export * as Metrics from "./Metrics.ts"
export * as OutboxLayer from "./OutboxLayer.ts"
export * as PartitionSend from "./PartitionSend.ts"
export * as Probe from "./Probe.ts"
export * as ProducerLeases from "./ProducerLeases.ts"
export * as Publisher from "./Publisher.ts"
export * as TopicLimits from "./TopicLimits.ts"
export * as TopicRead from "./TopicRead.ts"
export * as Transactions from "./Transactions.ts"
