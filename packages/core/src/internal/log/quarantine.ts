/**
 * The log relay's side of the quarantine (`LogLease.quarantine`): which events of a window are set
 * aside instead of sent (invalid ones; later events of a topic and key already in the quarantine),
 * which refusals are for good, and the republishing of what an operator released.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import type { PublishError } from "../../Errors.ts"
import type { LogQuarantine, QuarantineEntry } from "../../LogQuarantine.ts"
import type { LogMessage } from "../../LogRecord.ts"
import type { LogLease, LogSourceError } from "../../LogSource.ts"
import type { Publisher, PublishOutcome, PublishRequest } from "../../Publisher.ts"

/** Events moved to the quarantine, by status (`QUARANTINED`, `HELD`). */
export const quarantined = Metric.counter("outbox_log_quarantined_total", {
  description: "Events the log relay moved to its quarantine (refused for good, invalid, or held behind one)",
  incremental: true
})

/** A refusal no retry will change: the topic or partition does not exist, the record is refused. */
export const isPermanent = (error: PublishError): boolean => error.kind === "permanent"

const keyOf = (topic: string, key: string) => `${topic}\u0000${key}`

export interface Gate {
  /** Whether the source keeps a quarantine; without one nothing is set aside. */
  readonly enabled: boolean
  /** The entries to send, and those set aside (invalid, or behind a blocked topic and key). */
  readonly split: (
    entries: ReadonlyArray<LogMessage>,
    position: string
  ) => { readonly send: ReadonlyArray<LogMessage>; readonly aside: ReadonlyArray<QuarantineEntry> }
  /** The refused-for-good events of a send, as entries; their topics and keys block from now on. */
  readonly refused: (
    sent: ReadonlyArray<LogMessage>,
    outcomes: ReadonlyArray<PublishOutcome>,
    position: string
  ) => ReadonlyArray<QuarantineEntry>
  /** Stores entries, in log order. */
  readonly put: (entries: ReadonlyArray<QuarantineEntry>) => Effect.Effect<void, LogSourceError>
  /** At most every `every` ms: publishes what an operator released, in log order per key. */
  readonly release: (
    publish: Publisher["Service"]["publish"],
    toRequest: (message: LogMessage) => PublishRequest,
    fence: Effect.Effect<void, LogSourceError> | undefined
  ) => Effect.Effect<void, LogSourceError>
}

/** Loads the blocked keys of the lease's quarantine at the start of a drain. */
export const make = (lease: LogLease, every: number): Effect.Effect<Gate, LogSourceError> =>
  Effect.gen(function* () {
    const store: LogQuarantine | undefined = lease.quarantine
    const blocked = new Set<string>()
    const reload = Effect.gen(function* () {
      if (store === undefined) return
      const keys = yield* store.blocked
      blocked.clear()
      for (const k of keys) blocked.add(keyOf(k.topic, k.key))
    })
    yield* reload
    let releasedAt = 0

    const split: Gate["split"] = (entries, position) => {
      if (store === undefined) return { send: entries, aside: [] }
      const send: Array<LogMessage> = []
      const aside: Array<QuarantineEntry> = []
      for (const message of entries) {
        // Nothing blocked and a valid event (the usual case): no key to build and look up.
        if (message.invalid === undefined && blocked.size === 0) {
          send.push(message)
          continue
        }
        const k = typeof message.key === "string" ? keyOf(message.topic, message.key) : undefined
        if (message.invalid !== undefined) {
          aside.push({ message, position, status: "QUARANTINED", reason: `invalid: ${message.invalid}` })
          if (k !== undefined) blocked.add(k)
        } else if (k !== undefined && blocked.has(k)) {
          aside.push({ message, position, status: "HELD", reason: "behind an earlier event of its key" })
        } else send.push(message)
      }
      return { send, aside }
    }

    const refused: Gate["refused"] = (sent, outcomes, position) => {
      const out: Array<QuarantineEntry> = []
      // Several events of one key can be refused in one send: the first is quarantined, the
      // later ones wait behind it (HELD), as they would have had they come in a later window.
      const refusedKeys = new Set<string>()
      outcomes.forEach((outcome, i) => {
        if (Result.isSuccess(outcome)) return
        const message = sent[i]!
        const k = message.key === null ? undefined : keyOf(message.topic, message.key)
        if (k !== undefined && refusedKeys.has(k)) {
          out.push({ message, position, status: "HELD", reason: "behind an earlier event of its key" })
          return
        }
        out.push({ message, position, status: "QUARANTINED", reason: outcome.failure.message })
        if (k !== undefined) {
          refusedKeys.add(k)
          blocked.add(k)
        }
      })
      return out
    }

    const put: Gate["put"] = (entries) =>
      store === undefined || entries.length === 0
        ? Effect.void
        : Effect.gen(function* () {
            yield* store.put(entries)
            const held = entries.filter((e) => e.status === "HELD").length
            yield* Metric.update(Metric.withAttributes(quarantined, { status: "HELD" }), held)
            yield* Metric.update(Metric.withAttributes(quarantined, { status: "QUARANTINED" }), entries.length - held)
            for (const e of entries) {
              if (e.status === "QUARANTINED") {
                yield* Effect.logError(
                  `log relay: event ${e.message.id} (topic ${e.message.topic}, key ${e.message.key}) quarantined: ${e.reason}; its key's later events wait until it is retried or skipped`
                )
              }
            }
          })

    const release: Gate["release"] = (publish, toRequest, fence) =>
      Effect.gen(function* () {
        if (store === undefined) return
        const now = yield* Clock.currentTimeMillis
        if (now - releasedAt < every) return
        releasedAt = now
        const groups = yield* store.released
        if (groups.length > 0 && fence !== undefined) yield* fence
        for (const group of groups) {
          const outcomes = yield* publish(group.map(toRequest))
          const first = outcomes.findIndex(Result.isFailure)
          const upTo = first === -1 ? group.length : first
          const published = group.slice(0, upTo).map((m) => m.id)
          const failure = first === -1 ? undefined : (outcomes[first] as Result.Failure<unknown, PublishError>).failure
          if (failure === undefined || !isPermanent(failure)) {
            // Published, or a passing failure: the rest stays released for the next round.
            yield* store.settle({ published, behind: [] })
          } else {
            yield* store.settle({
              published,
              refused: { id: group[upTo]!.id, reason: failure.message },
              behind: group.slice(upTo + 1).map((m) => m.id)
            })
          }
          if (published.length > 0) {
            yield* Effect.logInfo(`log relay: ${published.length} released events published from the quarantine`)
          }
        }
        if (groups.length > 0) yield* reload
      })

    return { enabled: store !== undefined, split, refused, put, release }
  })

/** The entries sorted as their events came in the window. */
export const inLogOrder = (
  window: ReadonlyArray<LogMessage>,
  entries: ReadonlyArray<QuarantineEntry>
): ReadonlyArray<QuarantineEntry> => {
  if (entries.length < 2) return entries
  const index = new Map(window.map((m, i) => [m.id as string, i]))
  return [...entries].sort((a, b) => index.get(a.message.id)! - index.get(b.message.id)!)
}
