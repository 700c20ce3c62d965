/**
 * `ConsumerSource` on kafkajs (R4.5): per-partition batches from a consumer group, handed to the
 * stream one at a time, and offsets committed only when the core consumer says so (after its
 * database transaction committed).
 *
 * How a batch travels: kafkajs calls `eachBatch`; the callback hands the batch to the stream and
 * waits, heartbeating, until the stream's consumer pulls the next batch (it finished this one)
 * or the subscription closes (it did not). Only a finished batch moves the fetch position
 * forward; the committed position moves only through `commit`. kafkajs never commits by itself
 * (`autoCommit: false`), so a crash or shutdown redelivers everything after the last commit.
 *
 * Transaction markers and aborted records occupy offsets but are never delivered. A commit at
 * the offset right after the last delivered record of a batch moves past the markers and aborted
 * records that end that batch (and past marker-only batches that follow it), so a group that
 * finished a transactional topic commits its end and shows no lag.
 *
 * Rebalances: a commit for a partition this member no longer owns is dropped (logged and
 * counted), never sent: the new owner resumes from the last committed offset and redelivers,
 * and the idempotent consumer deduplicates. A commit the broker rejects because the group is
 * rebalancing fails with a retriable `ConsumerSourceError`. Every batch remembers the generation
 * it was fetched in; a rebalance starting (a heartbeat or fetch answering
 * `REBALANCE_IN_PROGRESS`) or a new join ends the generation, so `isCurrent` says `false` for
 * every batch delivered before it (kafkajs's eager protocol revokes every partition and resumes
 * each at the group's committed offset).
 *
 * Pausing a partition (`pause`) stops kafkajs fetching it; a batch of it already fetched is
 * abandoned, not handed out, and fetched again after `resume`.
 *
 * @since 0.1.0
 */
import {
  type ConsumerBatch,
  type ConsumerRecord,
  ConsumerSource,
  type OffsetCommit,
  type Subscription,
  type TopicPartition
} from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type Kafkajs from "kafkajs"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, rootCause, toConsumerError } from "./KafkaErrors.ts"
import { retrying } from "./KafkaRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaConsumerSourceOptions {
  /** kafkajs default 30000. Small values notice dead members sooner. */
  readonly sessionTimeoutMillis?: number | undefined
  /** kafkajs default 60000: how long a rebalance waits for members to rejoin. */
  readonly rebalanceTimeoutMillis?: number | undefined
  /** kafkajs default 3000; also the heartbeat period while a batch is being processed. */
  readonly heartbeatIntervalMillis?: number | undefined
  /** Longest a fetch waits for data (kafkajs default 5000). Lower is snappier, busier. */
  readonly maxWaitTimeMillis?: number | undefined
  /** Bytes per partition per fetch (kafkajs default 1 MiB): bounds a batch. */
  readonly maxBytesPerPartition?: number | undefined
  /** Upper bound on one commit call (default 10000 ms). */
  readonly commitTimeoutMillis?: number | undefined
  /**
   * How old the group's view of topic metadata may get (default 5000 ms; kafkajs default 300000).
   * A topic grown by `PartitionAssignment` or the relay's sync is noticed (and rebalanced onto)
   * within this, so its new partitions are read within seconds (H4).
   */
  readonly metadataMaxAgeMillis?: number | undefined
  /** Extra kafkajs consumer settings (retry, rackId…). */
  readonly consumerConfig?: Partial<Omit<Kafkajs.ConsumerConfig, "groupId">> | undefined
}

/**
 * @since 0.1.0
 * @category metrics
 */
export const droppedCommits = Metric.counter("outbox_kafka_dropped_commits_total", {
  description: "Offset commits dropped because the partition was no longer assigned to this member",
  incremental: true
})

type Outcome = "finished" | "abandoned"

interface Handoff {
  readonly batch: ConsumerBatch
  /** Last offset of the fetched batch (transaction markers included). */
  readonly lastOffset: bigint
  readonly settle: (outcome: Outcome) => void
  /** Taken back before the stream took it (a rebalance started): the stream skips it. */
  withdrawn: boolean
}

/** The heartbeat errors that mean "the group is rebalancing: rejoin". */
const isRebalancing = (error: unknown): boolean => {
  const type = (error as { readonly type?: unknown } | null)?.type
  return type === "REBALANCE_IN_PROGRESS" || type === "NOT_COORDINATOR_FOR_GROUP" || type === "ILLEGAL_GENERATION"
}

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

const headersOf = (headers: Kafkajs.IHeaders | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  if (headers === undefined) return out
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    const first = Array.isArray(value) ? value[0] : value
    if (first !== undefined) out[name] = first.toString()
  }
  return out
}

/**
 * @since 0.1.0
 * @category encoding
 */
export const toConsumerRecord = (topic: string, partition: number, message: Kafkajs.KafkaMessage): ConsumerRecord => ({
  topic,
  partition,
  offset: message.offset,
  key: message.key === null || message.key === undefined ? null : message.key.toString(),
  headers: headersOf(message.headers),
  value:
    message.value === null
      ? new Uint8Array(0)
      : new Uint8Array(message.value.buffer, message.value.byteOffset, message.value.byteLength),
  timestamp: Number(message.timestamp)
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const subscribe = (
  kafka: Kafkajs.Kafka,
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  options: KafkaConsumerSourceOptions = {}
): Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const heartbeatInterval = options.heartbeatIntervalMillis ?? 3_000
    const commitTimeout = options.commitTimeoutMillis ?? 10_000
    const queue = yield* Queue.unbounded<Handoff, ConsumerSourceError | Cause.Done>()
    const outstanding = new Set<Handoff>()
    let closed = false
    // topic -> partitions assigned to this member in the current generation
    let assignment = new Map<string, ReadonlySet<number>>()
    // Ends with every rebalance: batches fetched in an older generation are no longer current.
    let generation = 0
    const fetchedIn = new WeakMap<ConsumerBatch, number>()
    const paused = new Set<string>()
    // topic/partition -> highest offset committed through this subscription
    const committed = new Map<string, bigint>()
    // topic/partition -> where the latest fetched batch ends: after its last record (`records`)
    // and after its last offset of any kind (`offsets`: transaction markers, aborted records).
    const tails = new Map<string, { readonly records: bigint; offsets: bigint }>()

    const consumer = kafka.consumer({
      ...options.consumerConfig,
      groupId: request.groupId,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      sessionTimeout: options.sessionTimeoutMillis ?? 30_000,
      rebalanceTimeout: options.rebalanceTimeoutMillis ?? 60_000,
      heartbeatInterval,
      maxWaitTimeInMs: options.maxWaitTimeMillis ?? 5_000,
      metadataMaxAge: options.metadataMaxAgeMillis ?? options.consumerConfig?.metadataMaxAge ?? 5_000,
      ...(options.maxBytesPerPartition === undefined ? {} : { maxBytesPerPartition: options.maxBytesPerPartition })
    })

    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      generation++
      assignment = new Map(Object.entries(payload.memberAssignment).map(([topic, ps]) => [topic, new Set(ps)]))
    })
    consumer.on(consumer.events.REBALANCING, () => {
      generation++
    })
    // A batch of markers / aborted records only is not handed to `eachBatch` (kafkajs moves past
    // it by itself): extend the tail it continues, and when the group already committed up to
    // that tail, commit past the batch too (it holds nothing to process).
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      if (payload.batchSize !== 0 || payload.firstOffset === null || closed) return
      const slot = `${payload.topic}\u0000${payload.partition}`
      const tail = tails.get(slot)
      if (tail === undefined || tail.offsets !== BigInt(payload.firstOffset)) return
      const end = BigInt(payload.lastOffset) + 1n
      if (end <= tail.offsets) return
      const reached = committed.get(slot) === tail.offsets
      tail.offsets = end
      if (!reached || assignment.get(payload.topic)?.has(payload.partition) !== true) return
      consumer
        .commitOffsets([{ topic: payload.topic, partition: payload.partition, offset: end.toString() }])
        .then(() => {
          if ((committed.get(slot) ?? -1n) < end) committed.set(slot, end)
        })
        // Only markers are at stake: the next commit of this partition covers them.
        .catch(() => undefined)
    })
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      // kafkajs restarts by itself after retriable crashes; a crash it gives up on ends the stream.
      if (!payload.restart && !closed)
        Queue.failCauseUnsafe(queue, Cause.fail(toConsumerError("consume", payload.error)))
    })

    // The batch the stream handed out last. Pulling again in the same run means it is done
    // with. If the run ended first (`Stream.take`, a failure, an interruption) it is "stale":
    // a commit covering it still finishes it, otherwise the next pull abandons it and its
    // records are fetched again.
    let current: Handoff | undefined
    let currentStale = false

    const release = (outcome: Outcome) => {
      for (const handoff of outstanding) handoff.settle(outcome)
      outstanding.clear()
    }

    yield* Effect.acquireRelease(
      // Connecting, subscribing and starting are retried (KafkaRetry) while the broker is
      // unreachable or starting; a failed start disconnects first, so the next one starts clean.
      Effect.tryPromise({
        try: async () => {
          try {
            await consumer.connect()
            // Only partitions without a committed offset use this: a new group, and partitions added
            // to a grown topic. Starting those at their end would skip what was written before the
            // group noticed them (H4), so the default is their beginning.
            await consumer.subscribe({ topics: [...request.topics], fromBeginning: request.fromBeginning ?? true })
            await consumer.run({
              autoCommit: false,
              eachBatchAutoResolve: false,
              partitionsConsumedConcurrently: 1,
              eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
                if (closed || !isRunning() || isStale() || batch.messages.length === 0) return
                // Fetched before its partition was paused: fetched again after `resume`.
                if (paused.has(`${batch.topic}\u0000${batch.partition}`)) return
                let settle!: (outcome: Outcome) => void
                const done = new Promise<Outcome>((resolve) => {
                  settle = resolve
                })
                const handoff: Handoff = {
                  batch: {
                    topic: batch.topic,
                    partition: batch.partition,
                    records: batch.messages.map((m) => toConsumerRecord(batch.topic, batch.partition, m))
                  },
                  lastOffset: BigInt(batch.lastOffset()),
                  settle,
                  withdrawn: false
                }
                fetchedIn.set(handoff.batch, generation)
                tails.set(`${batch.topic}\u0000${batch.partition}`, {
                  records: BigInt(batch.messages[batch.messages.length - 1]!.offset) + 1n,
                  offsets: handoff.lastOffset + 1n
                })
                outstanding.add(handoff)
                Queue.offerUnsafe(queue, handoff)
                // Keep the membership alive while the stream works on the batch. A heartbeat that
                // reports a rebalance is not fatal: the member rejoins once this callback returns.
                // A batch the stream has not taken yet is withdrawn at once (redelivered later),
                // so the member rejoins promptly; one it took is waited for.
                const timer = setInterval(() => {
                  heartbeat().catch((error) => {
                    if (isRebalancing(error)) generation = Math.max(generation, (fetchedIn.get(handoff.batch) ?? 0) + 1)
                    if (isRebalancing(error) && current !== handoff && !handoff.withdrawn) {
                      handoff.withdrawn = true
                      settle("abandoned")
                    }
                  })
                }, heartbeatInterval)
                try {
                  const outcome = await done
                  if (outcome === "finished" && !closed) resolveOffset(batch.lastOffset())
                } finally {
                  clearInterval(timer)
                  outstanding.delete(handoff)
                }
              }
            })
          } catch (error) {
            // The release below only runs after a successful acquire: clean up a half-started one.
            await consumer.disconnect().catch(() => undefined)
            throw error
          }
        },
        catch: (error) => error
      }).pipe(
        retrying("consumer.subscribe"),
        Effect.mapError((error) => toConsumerError("subscribe", error))
      ),
      () =>
        Effect.promise(async () => {
          closed = true
          // Unblock a waiting eachBatch without moving its position: kafkajs waits for it
          // before leaving the group.
          release("abandoned")
          await consumer.disconnect().catch(() => undefined)
        }).pipe(Effect.andThen(Queue.end(queue)))
    )

    const takeLive: Effect.Effect<Handoff, ConsumerSourceError | Cause.Done> = Effect.flatMap(
      Queue.take(queue),
      (handoff) => (handoff.withdrawn ? takeLive : Effect.succeed(handoff))
    )
    const pull = Effect.suspend(() => {
      if (current !== undefined) {
        current.settle(currentStale ? "abandoned" : "finished")
        current = undefined
      }
      return takeLive
    }).pipe(
      Effect.map((handoff) => {
        current = handoff
        currentStale = false
        return [handoff.batch] as const
      })
    )
    const batches: Stream.Stream<ConsumerBatch, ConsumerSourceError> = Stream.fromPull(Effect.succeed(pull)).pipe(
      Stream.ensuring(
        Effect.sync(() => {
          currentStale = true
        })
      )
    )

    const commit = (offsets: ReadonlyArray<OffsetCommit>): Effect.Effect<void, ConsumerSourceError> =>
      Effect.gen(function* () {
        if (closed) {
          return yield* new ConsumerSourceError({
            operation: "commit",
            reason: "the subscription is closed",
            retriable: false
          })
        }
        const owned: Array<OffsetCommit> = []
        for (const requested of offsets) {
          const slot = `${requested.topic}\u0000${requested.partition}`
          // Up to the last record of the latest batch means up to its last offset: what lies
          // between (markers, aborted records) is never delivered.
          const tail = tails.get(slot)
          const o =
            tail !== undefined && BigInt(requested.offset) === tail.records && tail.offsets > tail.records
              ? { ...requested, offset: tail.offsets.toString() }
              : requested
          const offset = BigInt(o.offset)
          if (assignment.get(o.topic)?.has(o.partition) !== true) {
            yield* Metric.update(droppedCommits, 1)
            yield* Effect.logDebug(
              `dropping commit of ${o.topic}/${o.partition}@${o.offset}: partition no longer assigned to this member`
            )
            continue
          }
          // Committing the same or a lower offset again would at best be a no-op and at worst
          // move the group backwards.
          if ((committed.get(slot) ?? -1n) >= offset) continue
          owned.push(o)
        }
        if (owned.length === 0) return
        yield* Effect.tryPromise({
          try: () =>
            consumer.commitOffsets(owned.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }))),
          catch: (error) => error
        }).pipe(
          retrying("commit", { isRetriable: isCoordinatorMoving }),
          Effect.mapError((error) => toConsumerError("commit", error)),
          // The timeout bounds the retries too.
          Effect.timeoutOrElse({
            duration: commitTimeout,
            orElse: () =>
              Effect.fail(
                new ConsumerSourceError({
                  operation: "commit",
                  reason: `no answer within ${commitTimeout} ms`,
                  retriable: true
                })
              )
          })
        )
        for (const o of owned) {
          const slot = `${o.topic}\u0000${o.partition}`
          const offset = BigInt(o.offset)
          if ((committed.get(slot) ?? -1n) < offset) committed.set(slot, offset)
          // A commit that covers a whole outstanding batch finishes it, even if the stream
          // stopped without pulling again (e.g. `Stream.take`).
          for (const handoff of outstanding) {
            if (
              handoff.batch.topic === o.topic &&
              handoff.batch.partition === o.partition &&
              handoff.lastOffset < offset
            ) {
              handoff.settle("finished")
            }
          }
        }
      }).pipe(
        Effect.tapError((error) => Effect.logDebug(`kafka commit failed: ${describe(error)}`)),
        Effect.withSpan("kafka.consumer.commit", { attributes: { groupId: request.groupId } })
      )

    const isCurrent = (batch: ConsumerBatch): boolean => {
      const fetched = fetchedIn.get(batch)
      if (fetched === undefined) return true
      return !closed && fetched === generation && assignment.get(batch.topic)?.has(batch.partition) === true
    }
    const setPaused = (partitions: ReadonlyArray<TopicPartition>, pause: boolean) =>
      Effect.sync(() => {
        const byTopic = new Map<string, Array<number>>()
        for (const { partition, topic } of partitions) {
          const slot = `${topic}\u0000${partition}`
          if (pause) paused.add(slot)
          else paused.delete(slot)
          byTopic.set(topic, [...(byTopic.get(topic) ?? []), partition])
        }
        const request = [...byTopic].map(([topic, ps]) => ({ topic, partitions: ps }))
        try {
          if (pause) consumer.pause(request)
          else consumer.resume(request)
        } catch {
          // Not running (closing) or the topic is gone: nothing to fetch either way.
        }
      })

    return {
      batches,
      commit,
      isCurrent,
      pause: (partitions) => setPaused(partitions, true),
      resume: (partitions) => setPaused(partitions, false)
    }
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaConsumerSourceOptions = {}
): Effect.Effect<ConsumerSource["Service"], never, KafkaClient> =>
  Effect.gen(function* () {
    const { kafka } = yield* KafkaClient
    return ConsumerSource.of({ subscribe: (request) => subscribe(kafka, request, options) })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaConsumerSourceOptions = {}): Layer.Layer<ConsumerSource, never, KafkaClient> =>
  Layer.effect(ConsumerSource)(make(options))
