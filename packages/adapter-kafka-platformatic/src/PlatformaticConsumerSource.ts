/**
 * `ConsumerSource` on @platformatic/kafka: a consumer-group member whose records are handed out
 * one partition per batch, and whose offsets move only when the caller commits (after its
 * database transaction committed). Partitions without a committed offset start at the earliest
 * record when `fromBeginning`, else at the end, as with the kafkajs adapter.
 *
 * Differences from the kafkajs adapter (see docs/kafka.md): the client fetches ahead into a
 * stream buffer, so after a rebalance the stream may still hand out buffered records of a
 * partition this member lost; their commits are dropped (counted in `droppedCommits`) and the new
 * owner reads them again from the group's committed offset — at-least-once, deduplicated by the
 * inbox. Such batches are not current (`isCurrent`): a batch is current while no group join
 * happened since it was read and the partition is still assigned. The client pauses only its
 * whole stream, so `pause` holds a paused partition's records back in the adapter (the other
 * partitions keep flowing) and pauses the whole stream only when more than `maxHeldRecords`
 * wait; a group join drops what was held, since the stream then restarts every partition at the
 * group's committed offset.
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
import { Consumer, FetchIsolationLevels, type Message, type MessagesStream } from "@platformatic/kafka"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { patchFetch } from "./internal/abortedRecords.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, protocolTypes, toConsumerError } from "./PlatformaticErrors.ts"
import { retrying } from "./PlatformaticRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticConsumerSourceOptions {
  readonly sessionTimeoutMillis?: number | undefined
  readonly rebalanceTimeoutMillis?: number | undefined
  readonly heartbeatIntervalMillis?: number | undefined
  /** How long a fetch waits for records (default 5000). */
  readonly maxWaitTimeMillis?: number | undefined
  readonly maxBytesPerPartition?: number | undefined
  /** Upper bound on one commit, retries included (default 10000). */
  readonly commitTimeoutMillis?: number | undefined
  /** Most records in one batch (default 1000). */
  readonly maxBatchRecords?: number | undefined
  /** Records of paused partitions held back before the whole stream pauses (default 10000). */
  readonly maxHeldRecords?: number | undefined
}

/**
 * @since 0.1.0
 * @category metrics
 */
export const droppedCommits = Metric.counter("outbox_kafka_dropped_commits_total", {
  description: "Offset commits dropped because the partition was no longer assigned to this member",
  incremental: true
})

type RawMessage = Message<Buffer, Buffer, Buffer, Buffer>

const isCoordinatorMoving = (error: unknown): boolean => {
  const types = protocolTypes(error)
  return (
    types.has("NOT_COORDINATOR") || types.has("COORDINATOR_NOT_AVAILABLE") || types.has("COORDINATOR_LOAD_IN_PROGRESS")
  )
}

/**
 * @since 0.1.0
 * @category conversions
 */
export const toConsumerRecord = (message: RawMessage): ConsumerRecord => {
  const headers: Record<string, string> = {}
  for (const [name, value] of message.headers ?? new Map<Buffer, Buffer>()) {
    const key = name.toString()
    if (!(key in headers) && value !== undefined && value !== null) headers[key] = value.toString()
  }
  const key = message.key as Buffer | null | undefined
  const value = message.value as Buffer | null | undefined
  return {
    topic: message.topic,
    partition: message.partition,
    offset: message.offset.toString(),
    key: key === null || key === undefined ? null : key.toString(),
    headers,
    value: value === null || value === undefined ? new Uint8Array(0) : new Uint8Array(value),
    timestamp: Number(message.timestamp)
  }
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const subscribe = (
  client: PlatformaticClient["Service"],
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  options: PlatformaticConsumerSourceOptions = {}
): Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const commitTimeout = options.commitTimeoutMillis ?? 10_000
    const maxBatch = options.maxBatchRecords ?? 1_000
    const groupOptions = {
      sessionTimeout: options.sessionTimeoutMillis ?? 30_000,
      rebalanceTimeout: options.rebalanceTimeoutMillis ?? 60_000,
      heartbeatInterval: options.heartbeatIntervalMillis ?? 3_000
    }
    const consumer = new Consumer({ ...client.baseOptions, groupId: request.groupId, ...groupOptions })
    // The client's read_committed filter lets some aborted records through (internal/abortedRecords).
    patchFetch(consumer)
    // Partitions the runner paused, as topic\u0000partition.
    const paused = new Set<string>()
    // Records of paused partitions read from the stream, in offset order, until resumed.
    const held = new Map<string, Array<RawMessage>>()
    let heldCount = 0
    // Counts group joins: after one, the stream restarts every assigned partition at the group's
    // committed offset, so batches read before it are not current any more.
    let generation = 0
    consumer.on("consumer:group:join", () => {
      generation++
      held.clear()
      heldCount = 0
    })
    // topic/partition -> highest offset committed through this subscription
    const committed = new Map<string, bigint>()
    let closed = false

    const stream = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          consumer.consume({
            ...groupOptions,
            topics: [...request.topics],
            autocommit: false,
            // Where the group committed; partitions without a committed offset fall back here.
            mode: "committed",
            fallbackMode: request.fromBeginning === false ? "latest" : "earliest",
            isolationLevel: FetchIsolationLevels.READ_COMMITTED,
            maxWaitTime: options.maxWaitTimeMillis ?? 5_000,
            ...(options.maxBytesPerPartition === undefined
              ? {}
              : { maxBytesPerPartition: options.maxBytesPerPartition })
          }),
        catch: (error) => error
      }).pipe(
        retrying("consumer.subscribe"),
        Effect.mapError((error) => toConsumerError("subscribe", error)),
        Effect.onError(() => Effect.promise(() => consumer.close(true).catch(() => undefined)))
      ),
      (stream: MessagesStream<Buffer, Buffer, Buffer, Buffer>) =>
        Effect.promise(async () => {
          closed = true
          await stream.close().catch(() => undefined)
          // Leave the group (so the next member need not wait out the session), bounded.
          await Promise.race([
            consumer.close().catch(() => undefined),
            new Promise((resolve) => setTimeout(resolve, 5_000))
          ])
          await consumer.close(true).catch(() => undefined)
        })
    )

    // A record read from the stream that belongs to the next batch (another partition).
    let pending: RawMessage | undefined
    const slotOf = (topic: string, partition: number) => `${topic}\u0000${partition}`
    let streamPausedByUs = false
    const maxHeld = options.maxHeldRecords ?? 10_000
    const batchGeneration = new WeakMap<ConsumerBatch, number>()

    const hold = (message: RawMessage) => {
      const slot = slotOf(message.topic, message.partition)
      const list = held.get(slot) ?? []
      list.push(message)
      held.set(slot, list)
      heldCount++
      if (heldCount > maxHeld && !streamPausedByUs) {
        streamPausedByUs = true
        stream.pause()
      }
    }
    const toBatch = (messages: ReadonlyArray<RawMessage>): ConsumerBatch => {
      const batch: ConsumerBatch = {
        topic: messages[0]!.topic,
        partition: messages[0]!.partition,
        records: messages.map(toConsumerRecord)
      }
      batchGeneration.set(batch, generation)
      return batch
    }
    // A resumed partition's held records go first.
    const readHeld = (): ConsumerBatch | undefined => {
      for (const [slot, list] of held) {
        if (paused.has(slot)) continue
        const taken = list.splice(0, maxBatch)
        if (list.length === 0) held.delete(slot)
        heldCount -= taken.length
        if (streamPausedByUs && heldCount <= maxHeld / 2) {
          streamPausedByUs = false
          stream.resume()
        }
        if (taken.length > 0) return toBatch(taken)
      }
      return undefined
    }
    const next = (): RawMessage | undefined => {
      for (;;) {
        const message = pending ?? (stream.read() as RawMessage | null) ?? undefined
        pending = undefined
        if (message === undefined) return undefined
        if (!paused.has(slotOf(message.topic, message.partition))) return message
        hold(message)
      }
    }
    const readBatch = (): ConsumerBatch | undefined => {
      const fromHeld = readHeld()
      if (fromHeld !== undefined) return fromHeld
      const first = next()
      if (first === undefined) return undefined
      const messages: Array<RawMessage> = [first]
      while (messages.length < maxBatch) {
        const message = next()
        if (message === undefined) break
        if (message.topic !== first.topic || message.partition !== first.partition) {
          pending = message
          break
        }
        messages.push(message)
      }
      return toBatch(messages)
    }

    // The stream fetches only while someone listens for 'readable' (with no listener its
    // `readableFlowing` goes back to null and its fetch loop stops for good), so one listener
    // stays attached for the subscription's life and wakes the pull that waits.
    let failure: ConsumerSourceError | undefined
    let ended = false
    let wake: (() => void) | undefined
    const notify = () => {
      const w = wake
      wake = undefined
      w?.()
    }
    stream.on("readable", notify)
    stream.on("error", (error: unknown) => {
      failure ??= toConsumerError("consume", error)
      notify()
    })
    stream.on("close", () => {
      ended = true
      notify()
    })

    const pull: Effect.Effect<readonly [ConsumerBatch], ConsumerSourceError | Cause.Done> = Effect.callback<
      readonly [ConsumerBatch],
      ConsumerSourceError | Cause.Done
    >((resume) => {
      const attempt = () => {
        const batch = readBatch()
        if (batch !== undefined) return resume(Effect.succeed([batch] as const))
        if (failure !== undefined) return resume(Effect.fail(failure))
        if (ended || closed || stream.destroyed) return resume(Cause.done())
        wake = attempt
      }
      attempt()
      return Effect.sync(() => {
        if (wake === attempt) wake = undefined
      })
    })
    const batches: Stream.Stream<ConsumerBatch, ConsumerSourceError> = Stream.fromPull(Effect.succeed(pull))

    const owns = (topic: string, partition: number) =>
      consumer.assignments?.some((a) => a.topic === topic && a.partitions.includes(partition)) === true

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
        for (const o of offsets) {
          if (!owns(o.topic, o.partition)) {
            yield* Metric.update(droppedCommits, 1)
            yield* Effect.logDebug(
              `dropping commit of ${o.topic}/${o.partition}@${o.offset}: partition no longer assigned to this member`
            )
            continue
          }
          // Committing the same or a lower offset again would at best be a no-op and at worst
          // move the group backwards.
          if ((committed.get(`${o.topic}\u0000${o.partition}`) ?? -1n) >= BigInt(o.offset)) continue
          owned.push(o)
        }
        if (owned.length === 0) return
        yield* Effect.tryPromise({
          try: () =>
            consumer.commit({
              offsets: owned.map((o) => ({
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
          if ((committed.get(slot) ?? -1n) < BigInt(o.offset)) committed.set(slot, BigInt(o.offset))
        }
      }).pipe(
        Effect.tapError((error) => Effect.logDebug(`kafka commit failed: ${describe(error)}`)),
        Effect.withSpan("kafka.consumer.commit", { attributes: { groupId: request.groupId } })
      )

    const isCurrent = (batch: ConsumerBatch): boolean =>
      !closed && batchGeneration.get(batch) === generation && owns(batch.topic, batch.partition)
    const pause = (partitions: ReadonlyArray<TopicPartition>) =>
      Effect.sync(() => {
        for (const p of partitions) paused.add(slotOf(p.topic, p.partition))
      })
    const resume = (partitions: ReadonlyArray<TopicPartition>) =>
      Effect.sync(() => {
        for (const p of partitions) paused.delete(slotOf(p.topic, p.partition))
        // A pull waiting for records may now take the held ones.
        notify()
      })

    return { batches, commit, isCurrent, pause, resume }
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticConsumerSourceOptions = {}
): Effect.Effect<ConsumerSource["Service"], never, PlatformaticClient> =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    return ConsumerSource.of({ subscribe: (request) => subscribe(client, request, options) })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticConsumerSourceOptions = {}
): Layer.Layer<ConsumerSource, never, PlatformaticClient> => Layer.effect(ConsumerSource)(make(options))
