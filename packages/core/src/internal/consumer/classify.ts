/**
 * Whose failure is it? The infrastructure's (wait for it, without limit) or the record's own
 * (retry a few times, then dead-letter). Re-exported by `Consumer`.
 */

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
 * SQLSTATEs of the database rather than the statement (standard SQL classes): connection (08),
 * insufficient resources (53), shutting down or starting up (57P01-3), serialization failure,
 * deadlock and unknown completion (40001, 40P01, 40003), a read-only transaction (25006: a demoted
 * primary after a fail-over), idle-in-transaction, statement and lock timeouts (25P03, 57014,
 * 55P03). None is a verdict on the record: it waits instead of being dead-lettered.
 */
const isInfrastructureState = (code: string): boolean =>
  code.startsWith("08") ||
  code.startsWith("53") ||
  code === "57P01" ||
  code === "57P02" ||
  code === "57P03" ||
  code === "40001" ||
  code === "40P01" ||
  code === "40003" ||
  code === "25006" ||
  code === "25P03" ||
  code === "57014" ||
  code === "55P03"

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
    (typeof code === "string" && isInfrastructureState(code))
  )
}
