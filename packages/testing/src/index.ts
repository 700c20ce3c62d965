/**
 * `@effect-outbox/testing`: in-memory layers, fault injection, conformance suites and a real-service
 * harness, one namespace per module.
 *
 * @since 0.1.0
 */

export * as BrokerSuite from "./BrokerSuite.ts"
export * as ConsumerSourceSuite from "./ConsumerSourceSuite.ts"
export * as InboxStoreSuite from "./InboxStoreSuite.ts"
export * as InMemoryBroker from "./InMemoryBroker.ts"
export * as InMemoryDatabase from "./InMemoryDatabase.ts"
export * as InMemoryLifecycleRegistry from "./InMemoryLifecycleRegistry.ts"
export * as InMemoryLog from "./InMemoryLog.ts"
export * as InMemoryParkedStore from "./InMemoryParkedStore.ts"
export * as InMemoryTopicReader from "./InMemoryTopicReader.ts"
export * as InMemoryTransactionalProducer from "./InMemoryTransactionalProducer.ts"
export * as LifecycleRegistrySuite from "./LifecycleRegistrySuite.ts"
export * as LogSourceSuite from "./LogSourceSuite.ts"
export * as OutboxInvariants from "./OutboxInvariants.ts"
export * as OutboxStoreSuite from "./OutboxStoreSuite.ts"
export * as ParkedStoreSuite from "./ParkedStoreSuite.ts"
export * as PartitionAssignmentStoreSuite from "./PartitionAssignmentStoreSuite.ts"
export * as RealServices from "./RealServices.ts"
export * as SuiteCase from "./SuiteCase.ts"
export * as TopicReaderSuite from "./TopicReaderSuite.ts"
export * as TransactionalProducerSuite from "./TransactionalProducerSuite.ts"
export * as TransactorSuite from "./TransactorSuite.ts"
export * as WakeUpSuite from "./WakeUpSuite.ts"
