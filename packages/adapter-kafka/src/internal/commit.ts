/**
 * Offset commits of a kafkajs subscription: only for partitions this member still owns, never
 * backwards, past trailing transaction markers, retried while the coordinator moves and bounded
 * by a timeout. A commit that covers an outstanding batch finishes it.
 */
import type { OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type Kafkajs from "kafkajs"
import { describe, rootCause, toConsumerError } from "../KafkaErrors.ts"
import { retrying } from "../KafkaRetry.ts"
import { isAssigned, type State, slotOf } from "./handoff.ts"

/**
 * @since 0.1.0
 * @category metrics
 */
export const droppedCommits = Metric.counter("outbox_kafka_dropped_commits_total", {
  description: "Offset commits dropped because the partition was no longer assigned to this member",
  incremental: true
})

/**
 * A coordinator that is loading or moved (a fresh broker, a coordinator failover) accepts the
 * same commit a moment later. Membership errors need a rejoin first, which happens only after
 * the batch is released: they are the caller's to handle, not retried here.
 */
const isCoordinatorMoving = (error: unknown): boolean => {
  const type = rootCause(error).type
  return (
    type === "NOT_COORDINATOR_FOR_GROUP" ||
    type === "GROUP_COORDINATOR_NOT_AVAILABLE" ||
    type === "GROUP_LOAD_IN_PROGRESS"
  )
}

/** The requested offsets this member may commit (owned, moving forward), markers included. */
const owned = (state: State, offsets: ReadonlyArray<OffsetCommit>) =>
  Effect.gen(function* () {
    const out: Array<OffsetCommit> = []
    for (const requested of offsets) {
      const slot = slotOf(requested.topic, requested.partition)
      // Up to the last record of the latest batch means up to its last offset: what lies
      // between (markers, aborted records) is never delivered.
      const tail = state.tails.get(slot)
      const o =
        tail !== undefined && BigInt(requested.offset) === tail.records && tail.offsets > tail.records
          ? { ...requested, offset: tail.offsets.toString() }
          : requested
      if (!isAssigned(state, o.topic, o.partition)) {
        yield* Metric.update(droppedCommits, 1)
        yield* Effect.logDebug(
          `dropping commit of ${o.topic}/${o.partition}@${o.offset}: partition no longer assigned to this member`
        )
        continue
      }
      // Committing the same or a lower offset again would at best be a no-op and at worst
      // move the group backwards.
      if ((state.committed.get(slot) ?? -1n) >= BigInt(o.offset)) continue
      out.push(o)
    }
    return out
  })

/** Records what the broker accepted; a commit covering a whole outstanding batch finishes it,
 * even if the stream stopped without pulling again (e.g. `Stream.take`). */
const accepted = (state: State, commits: ReadonlyArray<OffsetCommit>): void => {
  for (const o of commits) {
    const slot = slotOf(o.topic, o.partition)
    const offset = BigInt(o.offset)
    if ((state.committed.get(slot) ?? -1n) < offset) state.committed.set(slot, offset)
    for (const handoff of state.outstanding) {
      if (handoff.batch.topic === o.topic && handoff.batch.partition === o.partition && handoff.lastOffset < offset) {
        handoff.settle("finished")
      }
    }
  }
}

export const commit =
  (consumer: Kafkajs.Consumer, state: State, options: { readonly groupId: string; readonly timeoutMillis: number }) =>
  (offsets: ReadonlyArray<OffsetCommit>): Effect.Effect<void, ConsumerSourceError> =>
    Effect.gen(function* () {
      if (state.closed) {
        return yield* new ConsumerSourceError({
          operation: "commit",
          reason: "the subscription is closed",
          retriable: false
        })
      }
      const commits = yield* owned(state, offsets)
      if (commits.length === 0) return
      yield* Effect.tryPromise({
        try: () =>
          consumer.commitOffsets(commits.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }))),
        catch: (error) => error
      }).pipe(
        retrying("commit", { isRetriable: isCoordinatorMoving }),
        Effect.mapError((error) => toConsumerError("commit", error)),
        // The timeout bounds the retries too.
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
      accepted(state, commits)
    }).pipe(
      Effect.tapError((error) => Effect.logDebug(`kafka commit failed: ${describe(error)}`)),
      Effect.withSpan(
        "kafka.consumer.commit",
        { attributes: { groupId: options.groupId } },
        { captureStackTrace: false }
      )
    )
