/**
 * A failed publish's fate: retry at a backoff time (an unavailable broker counts no attempt), or
 * give the row up; and before any row goes to `FAILURE`, the broker is asked whether its record
 * landed after all (a timeout, a lost acknowledgement): then it is `PUBLISHED`.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schedule from "effect/Schedule"
import { retryDelay } from "../../Backoff.ts"
import { BrokerProbe } from "../../BrokerProbe.ts"
import type { PublishError } from "../../Errors.ts"
import type { OutboxMessage } from "../../OutboxMessage.ts"
import * as Telemetry from "../../Telemetry.ts"
import type * as Transition from "../../Transition.ts"
import * as UnknownPartition from "../../UnknownPartition.ts"
import { describe } from "./publish.ts"

export interface FailureSettings extends UnknownPartition.Settings {
  readonly maxAttempts: number
  readonly backoff: Schedule.Schedule<unknown>
}

/** A failed row about to go to FAILURE, and whether its error was transient (its attempts ran out). */
export interface GiveUp {
  readonly row: OutboxMessage
  readonly failure: Transition.PublishFailure
  readonly retriable: boolean
}

/** What the probe before FAILURE found. */
export type Verdict =
  | { readonly _tag: "found"; readonly published: Transition.Published }
  | { readonly _tag: "unreachable"; readonly failure: Transition.PublishFailure }
  | { readonly _tag: "failure"; readonly failure: Transition.PublishFailure }

/**
 * Decides a failed row's fate: retry at a backoff time (`retryAt`), or give up (`retryAt:
 * null`) with a reason. An unavailable broker retries at `outageRetryAt`, attempts unchanged.
 */
export const classify = (
  s: FailureSettings,
  row: OutboxMessage,
  error: PublishError,
  now: number,
  lease: string,
  outageRetryAt: number
): Effect.Effect<Transition.PublishFailure> =>
  Effect.gen(function* () {
    const reason = describe(error)
    if (error.kind === "unavailable") {
      return {
        id: row.id,
        owner: lease,
        attempts: row.attempts,
        reason: `${reason} (broker unavailable: no attempt counted)`,
        retryAt: outageRetryAt
      }
    }
    const attempts = row.attempts + 1
    const give = (why: string): Transition.PublishFailure => ({
      id: row.id,
      owner: lease,
      attempts,
      reason: why,
      retryAt: null
    })
    if (error._tag === "UnknownPartitionError") {
      // Permanent as addressed, unless the topic grew since the relay last looked.
      yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "unknown_partition" }), 1)
      const resolved = yield* UnknownPartition.resolve(s, error.topic, error.partition, error)
      if (resolved._tag === "fail") return give(resolved.reason)
      if (resolved._tag === "unknown") return give(`${reason}; partition sync failed: ${resolved.reason}`)
    } else if (error.kind === "permanent") return give(reason)
    if (attempts >= s.maxAttempts) {
      yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "exhausted" }), 1)
      return give(`gave up after ${attempts} attempts: ${reason}`)
    }
    const delay = yield* retryDelay(s.backoff, attempts)
    if (Option.isNone(delay)) return give(`gave up after ${attempts} attempts (backoff schedule finished): ${reason}`)
    return { id: row.id, owner: lease, attempts, reason, retryAt: now + Math.max(0, Math.round(delay.value)) }
  })

/**
 * Probes the broker for each row about to go to FAILURE. Found: PUBLISHED with its receipt. A
 * probe error on a retriable failure: "unreachable" (retried as an outage). Absent, a probe error
 * on a permanent one, or no BrokerProbe: FAILURE (the reason says when it is not proven absent),
 * with a warning per row.
 */
export const probeBeforeFailure = (owner: string, candidates: ReadonlyArray<GiveUp>): Effect.Effect<Array<Verdict>> =>
  Effect.gen(function* () {
    if (candidates.length === 0) return []
    const probe = yield* Effect.serviceOption(BrokerProbe)
    return yield* Effect.forEach(
      candidates,
      ({ failure, retriable, row }) =>
        Effect.gen(function* () {
          let note = "; not probed (no BrokerProbe): the record may be on the broker"
          if (Option.isSome(probe)) {
            const found = yield* probe.value
              .find({ topic: row.topic, partition: row.partition, eventId: row.id, since: row.createdAt })
              .pipe(Effect.result)
            if (Result.isSuccess(found) && Option.isSome(found.success)) {
              yield* Metric.update(Metric.withAttributes(Telemetry.publishFailed, { kind: "landed" }), 1)
              yield* Effect.logWarning(
                `outbox relay ${owner}: event ${row.id} was about to go to FAILURE but is on the broker: PUBLISHED (${failure.reason})`
              )
              return { _tag: "found", published: { id: row.id, receipt: found.success.value } } satisfies Verdict
            }
            if (Result.isFailure(found) && retriable) {
              const reason = `${failure.reason}; probe before FAILURE failed: ${found.failure.message}`
              return { _tag: "unreachable", failure: { ...failure, reason } } satisfies Verdict
            }
            note = Result.isSuccess(found)
              ? ""
              : `; probe before FAILURE failed (${found.failure.message}): the record may be on the broker`
          }
          const given = { ...failure, reason: failure.reason + note }
          yield* Effect.logWarning(
            `outbox relay ${owner}: event ${row.id} (topic ${row.topic}, key ${row.key ?? "none"}) -> FAILURE: ${given.reason}`
          ).pipe(Effect.annotateLogs({ eventId: row.id, topic: row.topic }))
          return { _tag: "failure", failure: given } satisfies Verdict
        }),
      { concurrency: 8 }
    )
  })
