/**
 * Where a waiting key's younger rows go: a little after its head's `available_at` (by the head's
 * wait, at most a second), never before it. When the head comes due and is claimed, its younger
 * rows are not yet available: if the head is refused again (its partition still out), they were
 * never in the claim's scan while it was in flight; if it goes through, they follow a moment later.
 */
export const behindHead = (headAvailableAt: string, now: string) =>
  `(${headAvailableAt} + LEAST(interval '1 second', ${headAvailableAt} - ${now}))`
