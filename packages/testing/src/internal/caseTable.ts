/**
 * Registration of a suite's case table (Watermill's shape): one `it.live` per named case the
 * adapter offers, under one `describe`.
 *
 * @internal
 */
import { describe, it } from "@effect/vitest"
import type * as Effect from "effect/Effect"

export const registerCases = <C extends { readonly name: string }>(
  title: string,
  cases: ReadonlyArray<C>,
  options: {
    readonly offered?: (c: C) => boolean
    readonly run: (c: C) => Effect.Effect<unknown, unknown>
    readonly timeout: number
  }
): void => {
  describe(title, () => {
    for (const c of cases) {
      if (options.offered?.(c) === false) continue
      it.live(c.name, () => options.run(c), options.timeout)
    }
  })
}
