/**
 * The relay's outage state, kept per destination (topic and partition; for rows routed by key,
 * the partition their receipt or their unavailable verdict names, else the topic) so that one
 * unavailable partition does not throttle the others:
 *
 * - An unavailable destination's rows wait out its own backoff (its `n`-th unavailable batch in a
 *   row), attempts unchanged; the loop goes on claiming everything else. Their keys wait with
 *   them, since a key's younger rows are not claimed past a pending head.
 * - The whole loop pauses (claims nothing) only when a batch got nothing through and the broker
 *   looks out as a whole: a destination not yet known to be out failed in it (every destination
 *   of a batch failing, a publish timing out), or nothing at all got through since its
 *   destinations' outages began. A batch made only of rows of destinations already known to be
 *   out (their backoffs ending together) while others have been published since is no such
 *   evidence: those rows back off again and nothing else waits. Pausing in the other cases keeps
 *   a broker-wide outage from re-claiming the whole backlog at every backoff.
 * - A record that gets through ends its destination's outage, and the broker-wide one.
 *
 * An outage counts no attempt and churns no rows: every unavailable row is retried only when its
 * destination's backoff has passed.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import { outageDelay } from "../../Backoff.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import type { PublishOutcome } from "../../Publisher.ts"
import { describe, destination, isUnavailable } from "./publish.ts"

export interface Outage {
  /** Epoch millis before which the loop claims nothing (a broker-wide outage). */
  readonly pausedUntil: () => number
  /**
   * Notes a batch's outcomes (`outcomes[i]` for `rows[i]`) and returns when each unavailable
   * row may be retried, by row id.
   */
  readonly note: (
    rows: ReadonlyArray<OutboxMessage>,
    outcomes: ReadonlyArray<PublishOutcome>,
    now: number
  ) => Effect.Effect<ReadonlyMap<string, number>>
  /** One more broker-wide unavailable round in a row: pause claiming for the outage backoff. */
  readonly enter: (now: number, reason: string) => Effect.Effect<number>
  /** Destinations currently backing off: their unavailable batches in a row, since when. */
  readonly unavailable: () => ReadonlyMap<string, { readonly n: number; readonly since: number }>
}

/**
 * Where an outcome says a row went: a keyed row's partition is known from its receipt, or from an
 * unavailable verdict that names the partition (its leader away); else the row's own destination.
 */
const destinationOf = (row: OutboxMessage, outcome: PublishOutcome): string => {
  if (row.partition !== null) return destination(row)
  const partition = Result.isSuccess(outcome)
    ? outcome.success.partition
    : outcome.failure._tag === "BrokerUnavailableError"
      ? outcome.failure.partition
      : undefined
  return partition === undefined ? destination(row) : `${row.topic}\u0000${partition}`
}

export const make = (owner: string, outageBackoff: Schedule.Schedule<unknown>): Outage => {
  let outages = 0
  let pausedUntil = 0
  // Per unavailable destination: its unavailable batches in a row, and when its outage began.
  const destinations = new Map<string, { readonly n: number; readonly since: number }>()
  let lastSuccessAt = Number.NEGATIVE_INFINITY
  const mark = (d: string, now: number) => {
    const known = destinations.get(d)
    const next = { n: (known?.n ?? 0) + 1, since: known?.since ?? now }
    destinations.set(d, next)
    return next.n
  }

  const enter = (now: number, reason: string) =>
    Effect.gen(function* () {
      outages++
      const delay = yield* outageDelay(outageBackoff, outages)
      pausedUntil = Math.max(pausedUntil, now + delay)
      yield* Effect.logWarning(
        `outbox relay ${owner}: broker unavailable (${outages} in a row), no attempt counted; claiming again in ${delay} ms: ${reason}`
      )
      return now + delay
    })

  // Each unavailable destination of the batch waits out its own backoff.
  const backOff = (bad: ReadonlyArray<string>, now: number, reason: string) =>
    Effect.gen(function* () {
      const until = new Map<string, number>()
      for (const d of bad) {
        const n = mark(d, now)
        const delay = yield* outageDelay(outageBackoff, n)
        until.set(d, now + delay)
        const log = n === 1 ? Effect.logWarning : Effect.logDebug
        yield* log(
          `outbox relay ${owner}: ${d.replace("\u0000", " partition ")} unavailable (${n} in a row), its rows wait ${delay} ms, no attempt counted; other destinations go on: ${reason}`
        )
      }
      return until
    })

  const none: ReadonlyMap<string, number> = new Map()
  const note = (rows: ReadonlyArray<OutboxMessage>, outcomes: ReadonlyArray<PublishOutcome>, now: number) =>
    // No outage known and every record through: nothing to end or begin (the usual batch, so it
    // skips the per-row walk below).
    destinations.size === 0 && outages === 0 && rows.length > 0 && outcomes.every(Result.isSuccess)
      ? Effect.sync(() => {
          lastSuccessAt = now
          return none
        })
      : noteAny(rows, outcomes, now)

  const noteAny = (rows: ReadonlyArray<OutboxMessage>, outcomes: ReadonlyArray<PublishOutcome>, now: number) =>
    Effect.gen(function* () {
      const through = outcomes.some(Result.isSuccess)
      if (through) lastSuccessAt = now
      // A destination that took a record is back, unless it also refused one here (rows routed
      // by key share their topic's destination unless the outcome names the partition).
      const refused = new Set(
        rows.flatMap((row, i) => (isUnavailable(outcomes[i]!) ? [destinationOf(row, outcomes[i]!)] : []))
      )
      rows.forEach((row, i) => {
        const outcome = outcomes[i]!
        if (!Result.isSuccess(outcome)) return
        for (const d of [destination(row), destinationOf(row, outcome)]) if (!refused.has(d)) destinations.delete(d)
      })
      if (through && outages > 0) {
        yield* Effect.logInfo(`outbox relay ${owner}: the broker answers again after ${outages} failed publishes`)
        outages = 0
      }
      const failed = rows.flatMap((row, i) => (isUnavailable(outcomes[i]!) ? [{ row, outcome: outcomes[i]! }] : []))
      const retryAt = new Map<string, number>()
      if (failed.length === 0) return retryAt
      const first = failed[0]!.outcome
      const reason = Result.isFailure(first) ? describe(first.failure) : ""
      const bad = [...new Set(failed.map(({ outcome, row }) => destinationOf(row, outcome)))]
      const brokerWide =
        !through &&
        bad.some((d) => {
          const known = destinations.get(d)
          return known === undefined || lastSuccessAt < known.since
        })
      if (brokerWide) {
        // The broker itself looks out: everyone waits, and these destinations are known out.
        const until = yield* enter(now, reason)
        for (const d of bad) mark(d, now)
        for (const { row } of failed) retryAt.set(row.id, until)
        return retryAt
      }
      const until = yield* backOff(bad, now, reason)
      for (const { outcome, row } of failed) retryAt.set(row.id, until.get(destinationOf(row, outcome))!)
      return retryAt
    })

  return { pausedUntil: () => pausedUntil, note, enter, unavailable: () => destinations }
}
