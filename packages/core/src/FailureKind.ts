/**
 * What a failure means for a retry, decided once by the adapter that saw it and read by the relays
 * and the consumer (docs/architecture.md, "Who decides a retry").
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * What a failure means for a retry, decided by the adapter that saw it:
 * - `unavailable`: the database or broker cannot serve anyone right now (connection lost, shutting
 *   down, read-only after a fail-over, timeouts). Wait and ask again **without counting an
 *   attempt**: an outage of any length spends no retry budget and dead-letters nothing.
 * - `transient`: this request failed but may succeed if asked again: retry within the budget.
 * - `permanent`: asking again gives the same answer: give up.
 *
 * @since 0.1.0
 * @category models
 */
export const FailureKind = Schema.Literals(["unavailable", "transient", "permanent"])

/**
 * @since 0.1.0
 * @category models
 */
export type FailureKind = typeof FailureKind.Type

const kinds: ReadonlySet<unknown> = new Set<FailureKind>(["unavailable", "transient", "permanent"])

/**
 * The `kind` an error carries (store and publish errors, or your own with a `kind` field), or
 * `undefined` when it has none.
 *
 * @since 0.1.0
 * @category getters
 */
export const of = (error: unknown): FailureKind | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const kind = (error as { readonly kind?: unknown }).kind
  return kinds.has(kind) ? (kind as FailureKind) : undefined
}
