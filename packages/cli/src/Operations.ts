/**
 * The operator's actions as Effects over the library's ports. Each mutating action is a
 * dry run unless `execute` is set, selects rows through explicit filters, and changes them only
 * through core: `Transition.requeue` (audited), `Transition.release`, `StaleRecovery.runOnce`,
 * `DeadLetter.replay`, `Retention.runOnce`. Nothing here writes SQL.
 *
 * @since 0.1.0
 */
export * from "./operations/Changes.ts"
export * from "./operations/DeadLetterAudit.ts"
export * from "./operations/DeadLetters.ts"
export * from "./operations/Health.ts"
export * from "./operations/Inspect.ts"
export * from "./operations/LifecycleGroups.ts"
export * from "./operations/OperatorError.ts"
export * from "./operations/Parked.ts"
export * from "./operations/Purge.ts"
export * from "./operations/Stale.ts"
export * from "./operations/Status.ts"
export * from "./operations/Topics.ts"
