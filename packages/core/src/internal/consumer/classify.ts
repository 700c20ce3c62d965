/**
 * Whose failure is it? The infrastructure's (wait for it, without limit) or the record's own
 * (retry a few times, then dead-letter). Both read the `kind` the adapter that saw the failure
 * gave it (`FailureKind`); nothing here knows a driver. Re-exported by `Consumer`.
 */
import * as Context from "effect/Context"
import { isSqlError } from "effect/sql/SqlError"
import * as FailureKind from "../../FailureKind.ts"

/** @since 0.1.0 */
export type Classification = "transient" | "permanent"

/** Decides whether a record's own failure is worth retrying. */
export type Classifier = (error: unknown) => Classification

/** Decides whether a failure is the infrastructure's, not the record's. */
export type InfrastructureTest = (error: unknown) => boolean

const tagOf = (error: object): unknown => (error as { readonly _tag?: unknown })._tag

/**
 * - an error with a `kind`: `permanent` is permanent, `transient` and `unavailable` transient;
 * - `PayloadDecodeError`, `SchemaError`, `OutboxValidationError`: permanent (the same input fails
 *   the same way);
 * - any error with a boolean `retriable` field: by that field;
 * - anything else, `HandlerDefectError` included: transient.
 */
export const defaultClassifier: Classifier = (error) => {
  const kind = FailureKind.of(error)
  if (kind !== undefined) return kind === "permanent" ? "permanent" : "transient"
  if (typeof error === "object" && error !== null) {
    const tag = tagOf(error)
    if (tag === "PayloadDecodeError" || tag === "SchemaError" || tag === "OutboxValidationError") return "permanent"
    const retriable = (error as { readonly retriable?: unknown }).retriable
    if (typeof retriable === "boolean") return retriable ? "transient" : "permanent"
  }
  return "transient"
}

/**
 * An error of kind `unavailable`: a `StoreError` of the lookup, a transition, the inbox's
 * BEGIN/INSERT/COMMIT or a lost connection, a `BrokerUnavailableError`, or your own error with
 * that `kind`. An `effect/sql` `SqlError` of the handler's own SQL is the database's when the
 * driver marks it retryable (lost connection, deadlock, serialization failure, lock or statement
 * timeout); an adapter may know more (adapter-pg's `PgErrors.isInfrastructure`).
 */
export const defaultIsInfrastructure: InfrastructureTest = (error) => {
  if (FailureKind.of(error) === "unavailable") return true
  return isSqlError(error) && error.isRetryable
}

/**
 * The infrastructure test of a consumer whose options name none: {@link defaultIsInfrastructure},
 * unless the database adapter in context provides its own (adapter-pg's knows the SQLSTATEs a
 * handler's own SQL can fail with).
 */
export const DefaultInfrastructureTest = Context.Reference<InfrastructureTest>(
  "@effect-outbox/core/Consumer/DefaultInfrastructureTest",
  { defaultValue: () => defaultIsInfrastructure }
)
