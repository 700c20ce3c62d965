/**
 * How the log relay sends one window: in parts of at most `maxWindow` events, in log order, so a
 * very large transaction is never one publish call (nor one probe); each part probed first while
 * the window is unsure. Events set aside for the quarantine (invalid, held behind their key, or
 * refused for good) are collected; any other failure fails the window, to be read again and probed.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Result from "effect/Result"
import type { BrokerProbe } from "../../BrokerProbe.ts"
import type { QuarantineEntry } from "../../LogQuarantine.ts"
import type { LogMessage } from "../../LogRecord.ts"
import type { Publisher, PublishRequest } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"
import * as Quarantine from "./quarantine.ts"
import { probeUnconfirmed } from "./windowProbe.ts"

export const toRequest = (message: LogMessage): PublishRequest => ({
  id: message.id,
  topic: message.topic,
  key: message.key,
  partition: message.partition,
  headers: message.headers,
  payload: message.payload
})

/** A window's publish span, without a stack trace (docs/telemetry.md). */
const publishSpan = (count: number) =>
  runningSpan(Telemetry.spans.publish, { attributes: { "outbox.count": count, "outbox.engine": "log" } })

/** One publish call, with its span and metrics. */
const send = (publisher: Publisher["Service"], messages: ReadonlyArray<LogMessage>) =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    // An entry is a request as it is (the fields a publisher reads, and no `writeEventId`): no copy per event.
    const outcomes = yield* publisher.publish(messages).pipe(publishSpan(messages.length))
    yield* Metric.update(Telemetry.publishLatency, (yield* Clock.currentTimeMillis) - start)
    const failed = outcomes.filter(Result.isFailure).length
    yield* Metric.update(Telemetry.published, outcomes.length - failed)
    if (failed > 0) yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "log" }), failed)
    return outcomes
  })

export interface Deps {
  readonly publisher: Publisher["Service"]
  readonly probe: BrokerProbe["Service"]
  readonly gate: Quarantine.Gate
  /** Logs why the window failed and waits the backoff. */
  readonly fail: (reason: string) => Effect.Effect<void>
  readonly maxWindow: number
  readonly maxProbeFailures: number
  readonly probeConcurrency: number
  readonly skew: number
}

/**
 * `false` when the window must be read again; else the entries set aside, and whether the next
 * window must be probed too (every part probed was found whole on the broker).
 */
export type Sent = false | { readonly aside: ReadonlyArray<QuarantineEntry>; readonly stillUnsure: boolean }

export const make = (deps: Deps) => {
  const { fail, gate, maxProbeFailures, maxWindow, probe, probeConcurrency, publisher, skew } = deps
  let probeFailures = 0

  /** One part: probed first when `probing`; `false` to retry the window. */
  const part = (entries: ReadonlyArray<LogMessage>, position: string, probing: boolean) =>
    Effect.gen(function* () {
      let toSend = entries
      let landedWhole = false
      if (probing) {
        const giveUp = probeFailures + 1 >= maxProbeFailures
        const probed = yield* probeUnconfirmed(probe, entries, skew, probeConcurrency, giveUp)
        if (probed === undefined) {
          yield* fail(`the broker probe failed for an unconfirmed window (${++probeFailures} in a row)`)
          return false as const
        }
        probeFailures = 0
        toSend = probed.toSend
        landedWhole = probed.landedWhole
      }
      if (toSend.length === 0) return { refused: [], landedWhole }
      const outcomes = yield* send(publisher, toSend)
      const failures = outcomes.filter(Result.isFailure)
      // Refused for good (with a quarantine to put them in): set aside, the window goes on.
      const aside = gate.enabled && failures.every((f) => Quarantine.isPermanent(f.failure))
      if (failures.length > 0 && !aside) {
        yield* fail(`${failures.length} of ${toSend.length} events not acknowledged (${failures[0]!.failure.message})`)
        return false as const
      }
      return { refused: failures.length === 0 ? [] : gate.refused(toSend, outcomes, position), landedWhole }
    })

  return (fresh: ReadonlyArray<LogMessage>, position: string, unsure: boolean): Effect.Effect<Sent> =>
    Effect.gen(function* () {
      const aside: Array<QuarantineEntry> = []
      let probing = unsure
      // Part by part, in log order; the split sees the keys blocked by the parts before.
      for (let from = 0; from < fresh.length; from += maxWindow) {
        const split = gate.split(fresh.slice(from, from + maxWindow), position)
        aside.push(...split.aside)
        if (split.send.some((m) => m.invalid !== undefined)) {
          yield* fail("an invalid event in the log and no quarantine to move it to")
          return false
        }
        if (split.send.length === 0) continue
        const sent = yield* part(split.send, position, probing)
        if (sent === false) return false
        aside.push(...sent.refused)
        // A part not found whole was not sent before: neither were the parts after it.
        probing = probing && sent.landedWhole
      }
      return { aside, stillUnsure: probing }
    })
}
