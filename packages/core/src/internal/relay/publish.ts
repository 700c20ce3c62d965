/**
 * The relay's send: which rows of a batch go out (rule 2 of `Relay.ts`) and the one
 * `Publisher.publish` call for them, bounded by the publish timeout.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { BrokerUnavailableError, type PublishError, RetriablePublishError } from "../../Errors.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import { Publisher, type PublishOutcome, type PublishRequest } from "../../Publisher.ts"
import * as Telemetry from "../../Telemetry.ts"
import { runningSpan } from "../telemetry/runningSpan.ts"

export const isUnavailable = (outcome: PublishOutcome): boolean =>
  Result.isFailure(outcome) && outcome.failure.kind === "unavailable"

export const describe = (error: PublishError): string => {
  switch (error._tag) {
    case "RetriablePublishError":
    case "BrokerUnavailableError":
    case "PermanentPublishError":
      return `${error._tag}: ${error.reason}`
    case "UnknownPartitionError":
      return `UnknownPartitionError: ${error.message}`
  }
}

/** Where a row goes: its topic and partition, or its topic alone when the key routes it. */
export const destination = (row: OutboxMessage) => `${row.topic}\u0000${row.partition ?? "*"}`

/**
 * Rule 2: per key, rows are sent only while they go to the destination (topic, partition) of the
 * key's first row; from the first that does not, the key's rows are handed back unsent.
 */
export const splitByDestination = (
  rows: ReadonlyArray<OutboxMessage>
): { readonly send: Array<OutboxMessage>; readonly notSent: Array<OutboxMessage> } => {
  const firstDestination = new Map<string, string>()
  const cut = new Set<string>()
  const send: Array<OutboxMessage> = []
  const notSent: Array<OutboxMessage> = []
  for (const row of rows) {
    if (row.key !== null) {
      const first = firstDestination.get(row.key)
      if (first === undefined) firstDestination.set(row.key, destination(row))
      else if (cut.has(row.key) || first !== destination(row)) {
        cut.add(row.key)
        notSent.push(row)
        continue
      }
    }
    send.push(row)
  }
  return { send, notSent }
}

/**
 * One `Publisher.publish` call for `rows`, one outcome per row. No answer within
 * `publishTimeout` says nothing about the records: each is `BrokerUnavailableError`.
 */
export const publish = (
  rows: ReadonlyArray<OutboxMessage>,
  publishTimeout: Duration.Duration
): Effect.Effect<ReadonlyArray<PublishOutcome>, never, Publisher> =>
  Effect.gen(function* () {
    if (rows.length === 0) return []
    const publisher = yield* Publisher
    const requests = rows.map(
      (row): PublishRequest => ({
        id: row.id,
        topic: row.topic,
        key: row.key,
        partition: row.partition,
        headers: row.headers,
        payload: row.payload
      })
    )
    const start = yield* Clock.currentTimeMillis
    const answer = yield* publisher.publish(requests).pipe(Effect.timeoutOption(publishTimeout))
    const end = yield* Clock.currentTimeMillis
    yield* Metric.update(Telemetry.publishLatency, end - start)
    return rows.map((row, i): PublishOutcome => {
      if (Option.isNone(answer)) {
        return Result.fail(
          new BrokerUnavailableError({
            topic: row.topic,
            reason: `publish timed out after ${Duration.format(publishTimeout)} (the record may have landed)`
          })
        )
      }
      return (
        answer.value[i] ??
        Result.fail(
          new RetriablePublishError({ topic: row.topic, reason: "the publisher returned no outcome for this record" })
        )
      )
    })
  }).pipe(runningSpan(Telemetry.spans.publish, { attributes: { "outbox.batch_size": rows.length } }))
