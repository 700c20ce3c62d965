/**
 * Offset commits of a subscription: only for partitions this member still owns (others are
 * dropped and counted), never backwards, retried while the coordinator moves and bounded by a
 * timeout.
 *
 * @internal
 */
import type { OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { describe, protocolTypes, toConsumerError } from "../PlatformaticErrors.ts"
import { retrying } from "../PlatformaticRetry.ts"
import { type AnyConsumer, owns, type State, slotOf } from "./handoff.ts"

export const droppedCommits = Metric.counter("outbox_kafka_dropped_commits_total", {
  description: "Offset commits dropped because the partition was no longer assigned to this member",
  incremental: true
})

const isCoordinatorMoving = (error: unknown): boolean => {
  const types = protocolTypes(error)
  return (
    types.has("NOT_COORDINATOR") || types.has("COORDINATOR_NOT_AVAILABLE") || types.has("COORDINATOR_LOAD_IN_PROGRESS")
  )
}

/** The requested offsets this member may commit: owned, and moving forward. */
const owned = (consumer: AnyConsumer, state: State, offsets: ReadonlyArray<OffsetCommit>) =>
  Effect.gen(function* () {
    const out: Array<OffsetCommit> = []
    for (const o of offsets) {
      if (!owns(consumer, o.topic, o.partition)) {
        yield* Metric.update(droppedCommits, 1)
        yield* Effect.logDebug(
          `dropping commit of ${o.topic}/${o.partition}@${o.offset}: partition no longer assigned to this member`
        )
        continue
      }
      // Committing the same or a lower offset again would at best be a no-op and at worst
      // move the group backwards.
      if ((state.committed.get(slotOf(o.topic, o.partition)) ?? -1n) >= BigInt(o.offset)) continue
      out.push(o)
    }
    return out
  })

export const commit =
  (consumer: AnyConsumer, state: State, options: { readonly groupId: string; readonly timeoutMillis: number }) =>
  (offsets: ReadonlyArray<OffsetCommit>): Effect.Effect<void, ConsumerSourceError> =>
    Effect.gen(function* () {
      if (state.closed) {
        return yield* new ConsumerSourceError({
          operation: "commit",
          reason: "the subscription is closed",
          retriable: false
        })
      }
      const toCommit = yield* owned(consumer, state, offsets)
      if (toCommit.length === 0) return
      yield* Effect.tryPromise({
        try: () =>
          consumer.commit({
            offsets: toCommit.map((o) => ({
              topic: o.topic,
              partition: o.partition,
              offset: BigInt(o.offset),
              leaderEpoch: -1
            }))
          }),
        catch: (error) => error
      }).pipe(
        retrying("commit", isCoordinatorMoving),
        Effect.mapError((error) => toConsumerError("commit", error)),
        Effect.timeoutOrElse({
          duration: options.timeoutMillis,
          orElse: () =>
            Effect.fail(
              new ConsumerSourceError({
                operation: "commit",
                reason: `no answer within ${options.timeoutMillis} ms`,
                retriable: true
              })
            )
        })
      )
      for (const o of toCommit) {
        const slot = slotOf(o.topic, o.partition)
        if ((state.committed.get(slot) ?? -1n) < BigInt(o.offset)) state.committed.set(slot, BigInt(o.offset))
      }
    }).pipe(
      Effect.tapError((error) => Effect.logDebug(`kafka commit failed: ${describe(error)}`)),
      Effect.withSpan(
        "kafka.consumer.commit",
        { attributes: { groupId: options.groupId } },
        { captureStackTrace: false }
      )
    )
