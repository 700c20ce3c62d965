/**
 * One `send` for a whole publish call. Sending each partition's records in a `send` of its own
 * costs a produce request per partition, and measured about half the throughput of one `send`
 * with every partition's records (the client then writes one request per broker). When every
 * partition's records fit one record batch, the call sends them together.
 *
 * A failed combined send does not say which partition failed, and the idempotent producer's
 * sequence numbers for the partitions the broker did write are then uncertain. So any failure
 * replaces the producer, and the call is handed to the per-partition sends, which attribute each
 * verdict to its own records. Partitions that had landed are then sent again: a duplicate, never
 * a loss.
 *
 * @internal
 */
import { BrokerUnavailableError, RetriablePublishError } from "@effect-outbox/core/Errors"
import * as PartitionSend from "@effect-outbox/core/PartitionSend"
import type { PublishOutcome } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { describe } from "../PlatformaticErrors.ts"
import * as Send from "./send.ts"

/** Whether `parts` fit one request (`PartitionSend.fitsOneRequest`), each topic's limit read once. */
export const fits = (
  parts: ReadonlyArray<Send.Part>,
  limitFor: (topic: string) => Effect.Effect<number>
): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const limits = new Map<string, number>()
    for (const topic of new Set(parts.map((part) => part.topic))) limits.set(topic, yield* limitFor(topic))
    return PartitionSend.fitsOneRequest(parts, (topic) => limits.get(topic)!)
  })

/**
 * Sends `parts` in one `send` and writes each record's outcome at its index. `false` when the
 * send failed with time left: nothing is written, the producer is being replaced, and the caller
 * sends the call per partition.
 */
export const send = (
  sender: Send.Sender,
  parts: ReadonlyArray<Send.Part>,
  deadline: number,
  outcomes: Array<PublishOutcome | undefined>,
  onSent: (records: number) => Effect.Effect<void>
): Effect.Effect<boolean> =>
  Send.sendParts(sender, parts, deadline).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.gen(function* () {
          sender.leases.requestReset()
          // No answer by the deadline: the per-partition sends would have no time left either.
          if (error instanceof Send.SendError && error.verdict._tag === "BrokerUnavailableError") {
            const { reason } = error.verdict
            for (const part of parts) {
              const verdict = new BrokerUnavailableError({ topic: part.topic, reason })
              for (const record of part.records) outcomes[record.index] = Result.fail(verdict)
            }
            return true
          }
          yield* Effect.logDebug(
            `kafka publish of ${parts.length} partitions in one send failed, sending per partition: ${
              error instanceof Send.SendError ? error.verdict.message : describe(error)
            }`
          )
          return false
        }),
      onSuccess: (offsets) =>
        Effect.gen(function* () {
          let sent = 0
          parts.forEach((part, p) => {
            const base = offsets[p]
            part.records.forEach((record, i) => {
              outcomes[record.index] =
                base === undefined
                  ? Result.fail(
                      new RetriablePublishError({
                        topic: part.topic,
                        reason: `no offset reported for partition ${part.partition}`
                      })
                    )
                  : Result.succeed({
                      topic: part.topic,
                      partition: part.partition,
                      offset: (base + BigInt(i)).toString()
                    })
            })
            if (base !== undefined) sent += part.records.length
          })
          yield* onSent(sent)
          return true
        })
    })
  )
