/**
 * The ordering rule shared by the relay and stale recovery (`docs/ordering.md`): walk a
 * batch in `seq` order, and once a row of a key takes a decision that holds its key (a failed
 * publish, a requeue, a row left for later), hand every later row of that key the same fate
 * instead of deciding it on its own. A key's published rows then always form a prefix of its
 * creation order, and the held rows follow the one that held them.
 *
 * @since 0.1.0
 */

/**
 * What {@link walk} needs of a row.
 *
 * @since 0.1.0
 * @category models
 */
export interface Keyed {
  readonly key: string | null
}

/**
 * One row of a walk: decided on its own, or held behind an earlier row of its key (whose
 * decision it carries).
 *
 * @since 0.1.0
 * @category models
 */
export type Step<R, D> =
  | { readonly _tag: "decided"; readonly row: R; readonly index: number; readonly decision: D }
  | { readonly _tag: "held"; readonly row: R; readonly index: number; readonly behind: R; readonly decision: D }

/**
 * Walks `rows` (in `seq` order) and decides each with `decide`, unless an earlier row of its key
 * took a decision for which `holds` is true: then the row is held behind that one. Rows without a
 * key are never held.
 *
 * @since 0.1.0
 * @category ordering
 */
export const walk = <R extends Keyed, D>(
  rows: ReadonlyArray<R>,
  decide: (row: R, index: number) => D,
  holds: (decision: D) => boolean
): Array<Step<R, D>> => {
  const holders = new Map<string, { readonly row: R; readonly decision: D }>()
  return rows.map((row, index): Step<R, D> => {
    const holder = row.key === null ? undefined : holders.get(row.key)
    if (holder !== undefined) return { _tag: "held", row, index, behind: holder.row, decision: holder.decision }
    const decision = decide(row, index)
    if (row.key !== null && holds(decision)) holders.set(row.key, { row, decision })
    return { _tag: "decided", row, index, decision }
  })
}
