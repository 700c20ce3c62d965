/**
 * `@effect-outbox/adapter-pg`: the PostgreSQL layers on @effect/sql-pg, one namespace per module.
 *
 * @since 0.1.0
 */
export * as PgClaimCheck from "./PgClaimCheck.ts"
export * as PgEngine from "./PgEngine.ts"
export * as PgErrors from "./PgErrors.ts"
export * as PgInboxStore from "./PgInboxStore.ts"
export * as PgLifecycleRegistry from "./PgLifecycleRegistry.ts"
export * as PgLogFence from "./PgLogFence.ts"
export * as PgLogGauges from "./PgLogGauges.ts"
export * as PgLogOutbox from "./PgLogOutbox.ts"
export * as PgLogProgress from "./PgLogProgress.ts"
export * as PgLogQuarantine from "./PgLogQuarantine.ts"
export * as PgLogRetention from "./PgLogRetention.ts"
export * as PgLogSource from "./PgLogSource.ts"
export * as PgMigrations from "./PgMigrations.ts"
export * as PgOutbox from "./PgOutbox.ts"
export * as PgOutboxStore from "./PgOutboxStore.ts"
export * as PgPartitionAssignmentStore from "./PgPartitionAssignmentStore.ts"
export * as PgReadModel from "./PgReadModel.ts"
export * as PgTables from "./PgTables.ts"
export * as PgTransactor from "./PgTransactor.ts"
export * as PgWakeUp from "./PgWakeUp.ts"
