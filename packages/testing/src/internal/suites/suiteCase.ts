/**
 * One row of a conformance suite's table (Watermill's shape): a named behaviour, the adapter
 * feature it needs, and the case function that checks it. The suite module registers the rows;
 * the case functions live in `internal/suites/<suite>/*.ts`, grouped by what they exercise.
 *
 * @internal
 */
import type * as Effect from "effect/Effect"

export interface Case<Ctx, R, F extends string> {
  /** The test's title: what the adapter does, in a sentence. */
  readonly name: string
  /** The feature the case needs; an adapter that switches it off does not run the case. */
  readonly requires?: F
  /** Runs against the adapter's `unreachable` layer instead of a fresh one (only when it has one). */
  readonly unreachable?: true
  readonly run: (ctx: Ctx) => Effect.Effect<unknown, unknown, R>
}

/** The cases an adapter with these features runs (a feature left unset counts as offered). */
export const enabled = <Ctx, R, F extends string>(
  cases: ReadonlyArray<Case<Ctx, R, F>>,
  features: Readonly<Partial<Record<F, boolean>>>
): ReadonlyArray<Case<Ctx, R, F>> => cases.filter((c) => c.requires === undefined || features[c.requires] !== false)
