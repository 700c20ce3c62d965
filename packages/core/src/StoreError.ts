/**
 * The one error of every store port, with the kind of failure its adapter decided. Re-exported by
 * `Errors`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { FailureKind } from "./FailureKind.ts"

/**
 * A storage operation failed (database error, lost connection, …). Every store port (outbox,
 * inbox, parked records, partition assignment, lifecycle registry, read model, wake-up) fails
 * with it. `kind` ({@link FailureKind}) says whether waiting or trying again may help.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  operation: Schema.String,
  reason: Schema.String,
  kind: FailureKind,
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message() {
    return `outbox store ${this.operation} failed: ${this.reason}`
  }

  /** Whether asking again may help: any kind but `permanent`. */
  get retriable(): boolean {
    return this.kind !== "permanent"
  }
}

/**
 * The fields `OutboxStoreError` was built from: `retriable` instead of a kind.
 *
 * @since 0.1.0
 * @category errors
 */
export interface OutboxStoreErrorFields {
  readonly operation: string
  readonly reason: string
  readonly retriable: boolean
  readonly cause?: unknown
}

/**
 * The store error's former name. It builds a {@link StoreError} from the former fields: a
 * retriable failure becomes `unavailable` (the consumer and relay treated every retriable store
 * error as the database's), any other `permanent`.
 *
 * @deprecated Use {@link StoreError} with a `kind`.
 * @since 0.1.0
 * @category errors
 */
export const OutboxStoreError: new (fields: OutboxStoreErrorFields) => StoreError = class extends StoreError {
  constructor({ retriable, ...fields }: OutboxStoreErrorFields) {
    super({ ...fields, kind: retriable ? "unavailable" : "permanent" })
  }
}

/**
 * @deprecated Use {@link StoreError}.
 * @since 0.1.0
 * @category errors
 */
export type OutboxStoreError = StoreError
