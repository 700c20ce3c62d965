/**
 * One row of a conformance suite's table (Watermill's shape): a named behaviour, the adapter
 * features it needs, and the case function that checks it. The suite module lists the rows and
 * registers them with {@link register}; the case functions live in
 * `internal/suites/<suite>/*.ts`, grouped by what they exercise.
 *
 * @internal
 */
import { describe, it } from "@effect/vitest"
import type * as Effect from "effect/Effect"

export interface Case<Ctx, R, F extends string = never> {
  /** The test's title: what the adapter does, in a sentence. */
  readonly name: string
  /** The features the case needs; an adapter that switches one off does not run the case. */
  readonly requires?: F | ReadonlyArray<F>
  /** Runs against the adapter's `unreachable` layer instead of a fresh one (only when it has one). */
  readonly unreachable?: true
  readonly run: (ctx: Ctx) => Effect.Effect<unknown, unknown, R>
}

const requirements = <F extends string>(requires: F | ReadonlyArray<F> | undefined): ReadonlyArray<F> =>
  requires === undefined ? [] : typeof requires === "string" ? [requires as F] : (requires as ReadonlyArray<F>)

/** The cases an adapter with these features runs (a feature left unset counts as offered). */
export const enabled = <Ctx, R, F extends string>(
  cases: ReadonlyArray<Case<Ctx, R, F>>,
  features: Readonly<Partial<Record<F, boolean>>>
): ReadonlyArray<Case<Ctx, R, F>> =>
  cases.filter((c) => requirements(c.requires).every((feature) => features[feature] !== false))

/**
 * Registers one `it.live` per case the adapter offers under `describe(title)`; `run` gives a case
 * everything it needs (a fresh layer, its topics, its scope).
 */
export const register = <Ctx, R, F extends string>(
  title: string,
  cases: ReadonlyArray<Case<Ctx, R, F>>,
  options: {
    readonly features: Readonly<Partial<Record<F, boolean>>>
    readonly run: (c: Case<Ctx, R, F>) => Effect.Effect<unknown, unknown>
    readonly timeout: number
  }
): void => {
  describe(title, () => {
    for (const c of enabled(cases, options.features)) it.live(c.name, () => options.run(c), options.timeout)
  })
}
