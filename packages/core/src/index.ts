/**
 * @since 0.1.0
 */
export * as BrokerAdmin from "./BrokerAdmin.ts"
export * as BrokerProbe from "./BrokerProbe.ts"
export * as ConsumerSource from "./ConsumerSource.ts"
export * as Errors from "./Errors.ts"
export * as InboxStore from "./InboxStore.ts"
export * as Lifecycle from "./Lifecycle.ts"
export * as Outbox from "./Outbox.ts"
export * as OutboxMessage from "./OutboxMessage.ts"
export * as OutboxStore from "./OutboxStore.ts"
export * as PartitionAssignmentStore from "./PartitionAssignmentStore.ts"
export * as Publisher from "./Publisher.ts"
export * as Telemetry from "./Telemetry.ts"
export * as Transactor from "./Transactor.ts"
export * as Transition from "./Transition.ts"
export * as WakeUp from "./WakeUp.ts"
