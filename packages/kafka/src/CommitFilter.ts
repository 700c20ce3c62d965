/**
 * Offset commits of a consumer-group subscription, for any client: only for partitions this
 * member still owns (others are dropped and counted in `outbox_kafka_dropped_commits_total`),
 * never backwards, retried while the group coordinator moves and bounded by a timeout. A member
 * fenced by a rebalance gets a retriable `ConsumerSourceError`: its commit succeeds once it
 * rejoined, for the partitions it kept.
 *
 * @since 0.1.0
 */
import type { OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { retrying } from "./BrokerRetry.ts"
import { coordinatorMovingNames, type Protocol } from "./KafkaProtocol.ts"
import { droppedCommits } from "./Metrics.ts"

/**
 * The key of one partition in a subscription's maps.
 *
 * @since 0.1.0
 * @category models
 */
export const slotOf = (topic: string, partition: number): string => `${topic}\u0000${partition}`

/**
 * What the filter needs of a subscription.
 *
 * @since 0.1.0
 * @category models
 */
export interface Subscription {
  readonly isClosed: () => boolean
  /** Whether this member owns the partition now. */
  readonly owns: (topic: string, partition: number) => boolean
  /** `slotOf(topic, partition)` -> highest offset committed through this subscription. */
  readonly committed: Map<string, bigint>
  /** The offset actually committed for a requested one (default: as requested). */
  readonly adjust?: ((requested: OffsetCommit) => OffsetCommit) | undefined
  /** Commits the offsets on the client. */
  readonly send: (commits: ReadonlyArray<OffsetCommit>) => Promise<unknown>
  /** Runs once the broker accepted `commits` (after `committed` moved). */
  readonly accepted?: ((commits: ReadonlyArray<OffsetCommit>) => void) | undefined
}

/** The requested offsets this member may commit: owned, and moving forward. */
const owned = (subscription: Subscription, offsets: ReadonlyArray<OffsetCommit>) =>
  Effect.gen(function* () {
    const out: Array<OffsetCommit> = []
    for (const requested of offsets) {
      const o = subscription.adjust?.(requested) ?? requested
      if (!subscription.owns(o.topic, o.partition)) {
        yield* Metric.update(droppedCommits, 1)
        yield* Effect.logDebug(
          `dropping commit of ${o.topic}/${o.partition}@${o.offset}: partition no longer assigned to this member`
        )
        continue
      }
      // Committing the same or a lower offset again would at best be a no-op and at worst
      // move the group backwards.
      if ((subscription.committed.get(slotOf(o.topic, o.partition)) ?? -1n) >= BigInt(o.offset)) continue
      out.push(o)
    }
    return out
  })

/**
 * The subscription's `commit`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const commit =
  (
    protocol: Protocol,
    subscription: Subscription,
    options: { readonly groupId: string; readonly timeoutMillis: number }
  ) =>
  (offsets: ReadonlyArray<OffsetCommit>): Effect.Effect<void, ConsumerSourceError> =>
    Effect.gen(function* () {
      if (subscription.isClosed()) {
        return yield* new ConsumerSourceError({
          operation: "commit",
          reason: "the subscription is closed",
          retriable: false
        })
      }
      const commits = yield* owned(subscription, offsets)
      if (commits.length === 0) return
      yield* Effect.tryPromise({ try: () => subscription.send(commits), catch: (error) => error }).pipe(
        // A coordinator that is loading or moved accepts the same commit a moment later.
        // Membership errors need a rejoin first, which happens only after the batch is
        // released: they are the caller's to handle, not retried here.
        retrying(protocol, "commit", (error) => [...coordinatorMovingNames].some((name) => protocol.has(error, name))),
        Effect.mapError((error) => protocol.toConsumerError("commit", error)),
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
      for (const o of commits) {
        const slot = slotOf(o.topic, o.partition)
        if ((subscription.committed.get(slot) ?? -1n) < BigInt(o.offset))
          subscription.committed.set(slot, BigInt(o.offset))
      }
      subscription.accepted?.(commits)
    }).pipe(
      Effect.tapError((error) => Effect.logDebug(`kafka commit failed: ${protocol.describe(error)}`)),
      Effect.withSpan(
        "kafka.consumer.commit",
        { attributes: { groupId: options.groupId } },
        { captureStackTrace: false }
      )
    )
