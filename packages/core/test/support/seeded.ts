// Seeded randomness shared by the simulations: a replayed seed draws the same numbers.
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"

/** mulberry32: a tiny seeded PRNG for synchronous hooks, which cannot read the `Random` service. */
export const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** An integer in `[min, max]` from the (seeded) `Random` service. */
export const int = (min: number, max: number): Effect.Effect<number> => Random.nextIntBetween(min, max)

/** `true` with probability `p`, from the (seeded) `Random` service. */
export const chance = (p: number): Effect.Effect<boolean> => Effect.map(Random.next, (r) => r < p)
