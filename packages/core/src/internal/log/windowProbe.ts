/**
 * The takeover probe of the log relay: which events of an unconfirmed window are not on the
 * broker yet. A relay may have died between the broker's ack and the confirm, so the window it
 * was publishing is looked up by event id before it is sent again.
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type { BrokerProbe } from "../../BrokerProbe.ts"
import type { LogMessage } from "../../LogRecord.ts"
import * as Telemetry from "../../Telemetry.ts"

/**
 * The events of the window not on the broker yet; `undefined` when a probe failed (the window
 * stays unsent). One read per topic when the probe can search many ids at once.
 */
export const notYetPublished = (
  probe: BrokerProbe["Service"],
  entries: ReadonlyArray<LogMessage>,
  skew: number,
  concurrency: number
): Effect.Effect<ReadonlyArray<LogMessage> | undefined> => {
  const findMany = probe.findMany
  if (findMany === undefined) {
    return Effect.forEach(
      entries,
      (message) =>
        probe
          .find({
            topic: message.topic,
            partition: message.partition,
            eventId: message.id,
            since: message.createdAt - skew
          })
          .pipe(Effect.map(Option.isNone), Effect.option),
      { concurrency }
    ).pipe(
      Effect.map((verdicts) =>
        verdicts.some(Option.isNone) ? undefined : entries.filter((_, i) => Option.getOrThrow(verdicts[i]!))
      )
    )
  }
  const topics = new Map<string, Array<LogMessage>>()
  for (const message of entries) {
    const group = topics.get(message.topic)
    if (group === undefined) topics.set(message.topic, [message])
    else group.push(message)
  }
  return Effect.forEach(
    [...topics.values()],
    (messages) =>
      findMany({
        topic: messages[0]!.topic,
        partition: null,
        eventIds: messages.map((m) => m.id),
        since: messages.reduce((min, m) => Math.min(min, m.createdAt), Number.POSITIVE_INFINITY) - skew
      }),
    { concurrency }
  ).pipe(
    Effect.map((found) => entries.filter((m) => !found.some((receipts) => receipts.has(m.id)))),
    Effect.catch((error) => Effect.as(Effect.logWarning(`log relay: window probe failed: ${error.message}`), undefined))
  )
}

/**
 * What of an unconfirmed window is still to send, by the probe: `undefined` when the probe failed
 * (the window waits), unless `giveUp`, when it is all sent without an answer (duplicates possible,
 * which the consumer's `Inbox` absorbs, rather than a log stalled for good). `landedWhole`: every
 * event was found, so the previous holder got further and the next window is probed too.
 */
export const probeUnconfirmed = (
  probe: BrokerProbe["Service"],
  entries: ReadonlyArray<LogMessage>,
  skew: number,
  concurrency: number,
  giveUp: boolean
): Effect.Effect<{ readonly toSend: ReadonlyArray<LogMessage>; readonly landedWhole: boolean } | undefined> =>
  Effect.gen(function* () {
    const absent = yield* notYetPublished(probe, entries, skew, concurrency)
    if (absent === undefined) {
      if (!giveUp) return undefined
      yield* Effect.logWarning(
        `log relay: sending an unconfirmed window of ${entries.length} without a probe answer; duplicates possible`
      )
      return { toSend: entries, landedWhole: false }
    }
    const landed = entries.length - absent.length
    if (landed > 0) {
      yield* Metric.update(Telemetry.logProbeLanded, landed)
      yield* Effect.logInfo(`log relay: ${landed} of ${entries.length} unconfirmed events already on the broker`)
    }
    return { toSend: absent, landedWhole: absent.length === 0 }
  })
