/**
 * Whose failure is it? The infrastructure's (wait for it, without limit) or the record's own
 * (retry a few times, then dead-letter). Re-exported by `Consumer`.
 */
import * as SqlStates from "../../SqlStates.ts"

/** @since 0.1.0 */
export type Classification = "transient" | "permanent"

/** Decides whether a record's own failure is worth retrying. */
export type Classifier = (error: unknown) => Classification

/** Decides whether a failure is the infrastructure's, not the record's. */
export type InfrastructureTest = (error: unknown) => boolean

const tagOf = (error: object): unknown => (error as { readonly _tag?: unknown })._tag

/**
 * - `PayloadDecodeError`, `SchemaError`, `OutboxValidationError`: permanent (the same input fails
 *   the same way);
 * - any error with a boolean `retriable` field: by that field;
 * - anything else, `HandlerDefectError` included: transient.
 */
export const defaultClassifier: Classifier = (error) => {
  if (typeof error === "object" && error !== null) {
    const tag = tagOf(error)
    if (tag === "PayloadDecodeError" || tag === "SchemaError" || tag === "OutboxValidationError") return "permanent"
    const retriable = (error as { readonly retriable?: unknown }).retriable
    if (typeof retriable === "boolean") return retriable ? "transient" : "permanent"
  }
  return "transient"
}

/**
 * A retriable `OutboxStoreError` (lookup, transition, the inbox's BEGIN/INSERT/COMMIT, a lost
 * connection) or an `SqlError` of the database rather than the statement (the handler's own SQL on
 * a database that is down or failing over).
 */
export const defaultIsInfrastructure: InfrastructureTest = (error) => {
  if (typeof error !== "object" || error === null) return false
  const tag = tagOf(error)
  if (tag === "OutboxStoreError") return (error as { readonly retriable?: unknown }).retriable === true
  if (tag !== "SqlError") return false
  const sql = error as {
    readonly isRetryable?: unknown
    readonly reason?: { readonly _tag?: unknown; readonly cause?: { readonly code?: unknown } }
  }
  const code = sql.reason?.cause?.code
  return (
    sql.isRetryable === true ||
    sql.reason?._tag === "ConnectionError" ||
    (typeof code === "string" && SqlStates.isInfrastructure(code))
  )
}
