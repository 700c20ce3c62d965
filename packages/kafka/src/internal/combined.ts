/**
 * One produce request for a whole publish call. A client whose idempotent producer holds a lock
 * per broker around each produce request (kafkajs) sends the per-partition requests of one call
 * one after the other, a round trip each, and one slow answer delays the rest. When every
 * partition's records fit one record batch, the call sends them in one request per broker.
 *
 * A failed combined request says nothing about which partition failed, and kafkajs has rolled back
 * the sequence numbers of every partition in it, including partitions the broker wrote: another
 * send of such a partition on that producer would reuse sequences the broker already holds and be
 * dropped as a duplicate, a silent loss. So any failure replaces the producer, and the call is
 * handed to the per-partition sends, which attribute each verdict to its own records.
 * Partitions that had landed are then sent again: a duplicate, never a loss.
 */
import { BrokerUnavailableError } from "@effect-outbox/core/Errors"
import type { PublishOutcome } from "@effect-outbox/core/Publisher"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Receipts from "./receipts.ts"
import * as Send from "./send.ts"

/** Whether `parts` fit one request (`RecordSize.fitsOneRequest`), each topic's limit read once. */
export const fits = (
  parts: ReadonlyArray<Send.Part>,
  limitFor: (topic: string) => Effect.Effect<number>
): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const limits = new Map<string, number>()
    for (const topic of new Set(parts.map((part) => part.topic))) limits.set(topic, yield* limitFor(topic))
    return RecordSize.fitsOneRequest(parts, (topic) => limits.get(topic)!)
  })

/**
 * Whether a topic of `parts` reads as degraded now: its metadata fails (the last good layout
 * stands in) or names a partition without a leader. A fresh producer may then be unable to start
 * (kafkajs reads every topic's metadata on connect), so the parts are not sent again on one.
 */
const degraded = <P>(sender: Send.Sender<P>, parts: ReadonlyArray<Send.Part>): Effect.Effect<boolean> =>
  Effect.map(
    Effect.forEach([...new Set(parts.map((part) => part.topic))], (topic) =>
      sender.layouts.fetch(topic).pipe(
        Effect.map((layout) => layout?.stale === true || (layout?.leaderless ?? []).length > 0),
        Effect.orElseSucceed(() => true)
      )
    ),
    (flags) => flags.some(Boolean)
  )

/**
 * Sends `parts` in one request and writes each record's outcome at its index. `false` when the
 * request failed with time left: nothing is written, the producer is being replaced, and the
 * caller sends the call per partition.
 */
export const send = <P>(
  sender: Send.Sender<P>,
  parts: ReadonlyArray<Send.Part>,
  deadline: number,
  outcomes: Array<PublishOutcome | undefined>,
  onSent: (records: number) => Effect.Effect<void>
): Effect.Effect<boolean> =>
  Send.sendParts(sender, parts, deadline).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.gen(function* () {
          // No answer by the deadline, or an outage: `sendParts` tainted the partitions; the
          // per-partition sends would have no time left, or no broker, either.
          const reason =
            error instanceof Send.SendError
              ? error.verdict._tag === "BrokerUnavailableError"
                ? error.verdict.reason
                : undefined
              : sender.protocol.isBrokerUnavailable(error) && (yield* degraded(sender, parts))
                ? sender.protocol.describe(error)
                : undefined
          if (reason === undefined) sender.leases.requestReset()
          else {
            for (const part of parts) {
              const verdict = new BrokerUnavailableError({ topic: part.topic, reason })
              for (const record of part.records) outcomes[record.index] = Result.fail(verdict)
            }
            return true
          }
          yield* Effect.logDebug(
            `kafka publish of ${parts.length} partitions in one request failed, sending per partition: ${
              error instanceof Send.SendError ? error.verdict.message : sender.protocol.describe(error)
            }`
          )
          return false
        }),
      onSuccess: (offsets) =>
        Effect.gen(function* () {
          let sent = 0
          parts.forEach((part, p) => {
            const base = offsets[p]
            if (base === undefined) {
              const verdict = Result.fail(Send.notInMetadata(part.topic, part.partition))
              for (const record of part.records) outcomes[record.index] = verdict
              return
            }
            Receipts.write(outcomes, part.topic, part.partition, base, part.records)
            sent += part.records.length
          })
          yield* onSent(sent)
          return true
        })
    })
  )
