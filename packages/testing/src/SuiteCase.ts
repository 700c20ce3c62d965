/**
 * The one shape of every conformance suite (Watermill's table): a row names a behaviour, the
 * adapter features it needs, and the case function that checks it; `register` turns the rows an
 * adapter offers into tests. Public so that a suite of your own (an adapter's extra behaviours,
 * an end-to-end scenario) reads and registers like the shipped ones.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Internal from "./internal/suites/suiteCase.ts"

/**
 * One row: `name` is the test's title, `requires` the features it needs (an adapter that
 * switches one off does not run it), `run` the case function given the suite's context `Ctx`.
 *
 * @since 0.1.0
 * @category models
 */
export type Case<Ctx, R, F extends string = never> = Internal.Case<Ctx, R, F>

/**
 * The rows an adapter with these features runs (a feature left unset counts as offered).
 *
 * @since 0.1.0
 * @category suites
 */
export const enabled: <Ctx, R, F extends string>(
  cases: ReadonlyArray<Case<Ctx, R, F>>,
  features: Readonly<Partial<Record<F, boolean>>>
) => ReadonlyArray<Case<Ctx, R, F>> = Internal.enabled

/**
 * Registers one `it.live` per row the adapter offers under `describe(title)`; `run` gives a row
 * everything it needs (a fresh layer, its context, its scope).
 *
 * @since 0.1.0
 * @category suites
 */
export const register: <Ctx, R, F extends string>(
  title: string,
  cases: ReadonlyArray<Case<Ctx, R, F>>,
  options: {
    readonly features: Readonly<Partial<Record<F, boolean>>>
    readonly run: (c: Case<Ctx, R, F>) => Effect.Effect<unknown, unknown>
    readonly timeout: number
  }
) => void = Internal.register
