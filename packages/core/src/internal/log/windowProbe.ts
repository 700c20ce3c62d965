/**
 * The takeover probe of the log relay: which events of an unconfirmed window are not on the
 * broker yet. A relay may have died between the broker's ack and the confirm, so the window it
 * was publishing is looked up by event id before it is sent again.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { BrokerProbe } from "../../BrokerProbe.ts"
import type { LogMessage } from "../../LogRecord.ts"

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
