/**
 * The dashboard's recent history for its chart: backlog and publish rate, sampled from the
 * status counts on an interval and kept for the last minutes (a bounded ring, in memory).
 *
 * @since 0.1.0
 */
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"

/**
 * @since 0.1.0
 * @category models
 */
export interface Sample {
  readonly at: number
  /** Rows waiting to be published: `PENDING` and `DISPATCHING`. */
  readonly backlog: number
  /** Rows published so far and still in the table (published, processing or processed). */
  readonly published: number
}

/** Statuses a row reaches only after its publish. */
const publishedStatuses: ReadonlyArray<OutboxStatus> = ["PUBLISHED", "UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"]

/**
 * @since 0.1.0
 * @category sampling
 */
export const fromCounts = (at: number, byStatus: { readonly [S in OutboxStatus]?: number }): Sample => ({
  at,
  backlog: (byStatus.PENDING ?? 0) + (byStatus.DISPATCHING ?? 0),
  published: publishedStatuses.reduce((total, s) => total + (byStatus[s] ?? 0), 0)
})

/**
 * Appends a sample, keeping those of the last `windowMillis`.
 *
 * @since 0.1.0
 * @category sampling
 */
export const append = (samples: ReadonlyArray<Sample>, sample: Sample, windowMillis: number): ReadonlyArray<Sample> => [
  ...samples.filter((s) => s.at > sample.at - windowMillis),
  sample
]

/**
 * Publishes per second between consecutive samples (never negative: a purge lowers the count
 * without unpublishing anything).
 *
 * @since 0.1.0
 * @category sampling
 */
export const publishRate = (
  samples: ReadonlyArray<Sample>
): ReadonlyArray<{ readonly at: number; readonly perSecond: number }> =>
  samples.slice(1).map((s, i) => {
    const before = samples[i]!
    const seconds = Math.max(0.001, (s.at - before.at) / 1000)
    return { at: s.at, perSecond: Math.max(0, s.published - before.published) / seconds }
  })

/**
 * Publishes per second over (about) the last `overMillis`: from the newest sample back to the
 * oldest one within that span; 0 with fewer than two samples.
 *
 * @since 0.1.0
 * @category sampling
 */
export const recentRate = (samples: ReadonlyArray<Sample>, overMillis: number): number => {
  const last = samples.at(-1)
  const first = samples.find((s) => last !== undefined && s.at >= last.at - overMillis)
  if (last === undefined || first === undefined || first === last) return 0
  return Math.max(0, last.published - first.published) / Math.max(0.001, (last.at - first.at) / 1000)
}
