/**
 * Small statistics helpers: medians, percentiles and the spread of repeated measurements.
 */

/** The `q` quantile (0..1) of `values`, linear interpolation; NaN for an empty input. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo)
}

export const median = (values: ReadonlyArray<number>): number => quantile(values, 0.5)

/** The largest value; NaN for an empty input. A loop, not `Math.max(...values)`, which overflows the stack past ~100k values. */
export const maximum = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => Math.max(a, b))

/** The smallest value; NaN for an empty input (a loop, as `maximum`). */
export const minimum = (values: ReadonlyArray<number>): number =>
  values.length === 0 ? Number.NaN : values.reduce((a, b) => Math.min(a, b))

/** Median with the full range of the repetitions: what a reader needs to judge noise. */
export interface Spread {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

export const spread = (values: ReadonlyArray<number>): Spread => ({
  median: median(values),
  min: minimum(values),
  max: maximum(values),
  n: values.length
})

export const fmt = (x: number, digits = 0): string =>
  Number.isFinite(x)
    ? x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "n/a"

export const fmtSpread = (s: Spread, digits = 2): string =>
  `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`
