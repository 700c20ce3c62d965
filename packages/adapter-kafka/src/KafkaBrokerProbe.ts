/**
 * `BrokerProbe` on kafkajs: did a timed-out send land after all? Reads the partition
 * from the offset of `since` up to the end offset captured at the start, looking for the
 * record whose `event-id` header matches.
 *
 * kafkajs's admin reports the last stable offset as the end: the high watermark unless another
 * producer's Kafka transaction is open on the partition (the relay never writes transactionally).
 * Records past it are not searched; the answer is then `None` and the relay republishes, which
 * the consumer's event-id identity absorbs.
 *
 * @since 0.1.0
 */

import { randomUUID } from "node:crypto"
import { BrokerProbe, type ProbeManyRequest, type ProbeRequest } from "@effect-outbox/core/BrokerProbe"
import { ProbeError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type EventId, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type Kafkajs from "kafkajs"
import { withEphemeralAdmin } from "./internal/ephemeralAdmin.ts"
import { connectWhenCoordinatorReady } from "./internal/groupCoordinator.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, protocol, toProbeError } from "./KafkaErrors.ts"
import { brokerCall } from "./KafkaRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaBrokerProbeOptions {
  /** Give up (with `ProbeError`, not `None`) after this long (default 30000 ms). */
  readonly timeoutMillis?: number | undefined
  /** Give up (with `ProbeError`) after reading this many records (default 1,000,000). */
  readonly maxRecords?: number | undefined
  /**
   * Start reading this much before `since`: record timestamps come from the producer's clock,
   * which may trail the clock that recorded `since` (default 60000 ms).
   */
  readonly clockSkewMillis?: number | undefined
  /** Prefix of the throwaway consumer groups (default `effect-outbox-probe`). */
  readonly groupPrefix?: string | undefined
}

interface Range {
  readonly partition: number
  readonly start: bigint
  /** The high watermark at the start: the probe never reads past it. */
  readonly end: bigint
}

const headerText = (value: Kafkajs.IHeaders[string]): string | undefined => {
  if (value === undefined) return undefined
  const first = Array.isArray(value) ? value[0] : value
  return first === undefined ? undefined : first.toString()
}

/**
 * Which offsets to read: from the first offset at or after `since` (minus skew) to the high
 * watermark now. Partitions with nothing in that range are left out.
 */
const ranges = (admin: Kafkajs.Admin, request: ProbeRequest, skew: number) =>
  Effect.gen(function* () {
    const { topic } = request
    // Metadata answers "no such topic" at once; the offset calls would retry for seconds first.
    yield* brokerCall("metadata", () => admin.fetchTopicMetadata({ topics: [topic] }))
    const ends = yield* brokerCall("topicOffsets", () => admin.fetchTopicOffsets(topic))
    const starts = yield* brokerCall("topicOffsetsByTimestamp", () =>
      admin.fetchTopicOffsetsByTimestamp(topic, Math.max(0, request.since - skew))
    )
    const result: Array<Range> = []
    for (const { partition, high, low } of ends) {
      if (request.partition !== null && partition !== request.partition) continue
      const startText = starts.find((s) => s.partition === partition)?.offset
      // -1 means no record at or after the timestamp: nothing to read.
      const start = startText === undefined || startText === "-1" ? BigInt(high) : BigInt(startText)
      const from = start < BigInt(low) ? BigInt(low) : start
      if (from < BigInt(high)) result.push({ partition, start: from, end: BigInt(high) })
    }
    return result
  }).pipe(
    Effect.map(Option.some),
    Effect.catch((error) =>
      protocol.isUnknownTopic(error)
        ? Effect.succeed(Option.none<ReadonlyArray<Range>>())
        : Effect.fail(toProbeError(request.topic, error))
    )
  )

/** Reads `todo` until every wanted id is found or every range is read (the caller bounds the time). */
const readRanges = (
  consumer: Kafkajs.Consumer,
  topic: string,
  wanted: ReadonlySet<string>,
  todo: ReadonlyArray<Range>,
  maxRecords: number,
  found: Map<string, PublishReceipt>,
  counted: { read: number }
): Effect.Effect<Map<string, PublishReceipt>, ProbeError> =>
  Effect.callback<Map<string, PublishReceipt>, ProbeError>((resume) => {
    const pending = new Map(todo.map((r) => [r.partition, r]))
    let settled = false
    const finish = (outcome: Effect.Effect<Map<string, PublishReceipt>, ProbeError>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    const progress = (partition: number, lastOffset: bigint) => {
      const range = pending.get(partition)
      if (range !== undefined && lastOffset >= range.end - 1n) pending.delete(partition)
      if (pending.size === 0) finish(Effect.succeed(found))
    }
    // Batches made only of transaction markers never reach eachBatch: track them here.
    consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => {
      if (payload.topic === topic && payload.batchSize === 0) progress(payload.partition, BigInt(payload.lastOffset))
    })
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) finish(Effect.fail(toProbeError(topic, payload.error)))
    })
    // Seek on every join, before the first fetch: a consumer that crashed on a retriable
    // error (a coordinator still loading) restarts and joins again, and a seek right after
    // `run` would then hit a consumer between two runs. Without a seek the consumer starts
    // from the beginning, which only costs time (offsets outside the ranges are skipped).
    consumer.on(consumer.events.GROUP_JOIN, () => {
      for (const range of todo) {
        try {
          consumer.seek({ topic: topic, partition: range.partition, offset: range.start.toString() })
        } catch {
          // the consumer stopped again; its next join seeks
        }
      }
    })
    const run = async () => {
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: true,
        eachBatch: async ({ batch }) => {
          if (settled || batch.topic !== topic) return
          const range = pending.get(batch.partition)
          if (range === undefined) return
          for (const message of batch.messages) {
            const offset = BigInt(message.offset)
            if (offset < range.start || offset >= range.end) continue
            counted.read++
            const id = headerText(message.headers?.[EVENT_ID_HEADER])
            if (id !== undefined && wanted.has(id) && !found.has(id)) {
              found.set(id, { topic: batch.topic, partition: batch.partition, offset: message.offset })
              if (found.size === wanted.size) {
                finish(Effect.succeed(found))
                return
              }
            }
          }
          if (counted.read >= maxRecords) {
            finish(
              Effect.fail(new ProbeError({ topic: topic, reason: `gave up after reading ${counted.read} records` }))
            )
            return
          }
          progress(batch.partition, BigInt(batch.lastOffset()))
        }
      })
    }
    run().catch((error) => finish(Effect.fail(toProbeError(topic, error))))
    return Effect.sync(() => {
      settled = true
    })
  })

/**
 * Reads the ranges with a throwaway consumer (its own group id, nothing committed, read
 * uncommitted so records of open transactions count as "reached the broker").
 */
const scan = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: { readonly topic: string },
  wanted: ReadonlySet<string>,
  todo: ReadonlyArray<Range>,
  options: KafkaBrokerProbeOptions
): Effect.Effect<Map<string, PublishReceipt>, ProbeError> => {
  const found = new Map<string, PublishReceipt>()
  const groupId = `${options.groupPrefix ?? "effect-outbox-probe"}-${randomUUID()}`
  const maxRecords = options.maxRecords ?? 1_000_000
  const timeoutMillis = options.timeoutMillis ?? 30_000
  const counted = { read: 0 }
  return Effect.acquireUseRelease(
    Effect.sync(() =>
      kafka.consumer({
        groupId,
        readUncommitted: true,
        allowAutoTopicCreation: false,
        sessionTimeout: 10_000,
        rebalanceTimeout: 10_000,
        heartbeatInterval: 1_000,
        maxWaitTimeInMs: 100,
        retry: { retries: 3 }
      })
    ),
    (consumer) =>
      // A fresh broker's coordinator may still be loading; an unreachable broker ends, once the
      // retry bound is spent, in a ProbeError. (Here, not in the acquire: interruptible.)
      connectWhenCoordinatorReady(admin, consumer, groupId).pipe(
        Effect.mapError((error) => toProbeError(request.topic, error)),
        Effect.andThen(
          readRanges(consumer, request.topic, wanted, todo, maxRecords, found, counted).pipe(
            Effect.timeoutOrElse({
              duration: timeoutMillis,
              orElse: () =>
                Effect.fail(
                  new ProbeError({
                    topic: request.topic,
                    reason: `no answer within ${timeoutMillis} ms (read ${counted.read} records)`
                  })
                )
            }),
            // The broker lives in real time, also under a TestClock.
            Effect.provideService(Clock.Clock, Clock.Clock.defaultValue())
          )
        )
      ),
    (consumer) =>
      Effect.promise(async () => {
        await consumer.disconnect().catch(() => undefined)
        // The group never committed anything; remove it so probes leave no trace.
        await admin.deleteGroups([groupId]).catch(() => undefined)
      })
  )
}

/**
 * @since 0.1.0
 * @category operations
 */
export const find = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: ProbeRequest,
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<Option.Option<PublishReceipt>, ProbeError> =>
  withEphemeralAdmin(
    kafka,
    (offsetsAdmin) => ranges(offsetsAdmin, request, options.clockSkewMillis ?? 60_000),
    (error) => toProbeError(request.topic, error)
  ).pipe(
    Effect.flatMap((todo) =>
      Option.isNone(todo) || todo.value.length === 0
        ? Effect.succeed(Option.none<PublishReceipt>())
        : scan(kafka, admin, request, new Set([request.eventId]), todo.value, options).pipe(
            Effect.map((found) => Option.fromNullishOr(found.get(request.eventId)))
          )
    ),
    Effect.tap((found) =>
      Effect.logDebug(
        `kafka probe ${request.topic}/${request.partition ?? "*"} for ${request.eventId}: ${Option.isSome(found) ? `found at ${found.value.partition}@${found.value.offset}` : "absent"}`
      )
    ),
    Effect.tapError((error) => Effect.logDebug(`kafka probe failed: ${describe(error)}`)),
    Effect.withSpan("kafka.probe.find", { attributes: { topic: request.topic, partition: request.partition ?? -1 } })
  )

/**
 * Every event of `eventIds` found in `topic` (one read of each partition from `since`, one
 * throwaway consumer): the log relay's takeover probe of a whole window.
 *
 * @since 0.3.0
 * @category operations
 */
export const findMany = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  request: ProbeManyRequest,
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> => {
  const single: ProbeRequest = {
    topic: request.topic,
    partition: request.partition,
    eventId: request.eventIds[0]!,
    since: request.since
  }
  if (request.eventIds.length === 0) return Effect.succeed(new Map())
  return withEphemeralAdmin(
    kafka,
    (offsetsAdmin) => ranges(offsetsAdmin, single, options.clockSkewMillis ?? 60_000),
    (error) => toProbeError(request.topic, error)
  ).pipe(
    Effect.flatMap((todo) =>
      Option.isNone(todo) || todo.value.length === 0
        ? Effect.succeed(new Map<EventId, PublishReceipt>())
        : (scan(kafka, admin, request, new Set<string>(request.eventIds), todo.value, options) as Effect.Effect<
            Map<EventId, PublishReceipt>,
            ProbeError
          >)
    ),
    Effect.withSpan("kafka.probe.findMany", { attributes: { topic: request.topic, count: request.eventIds.length } })
  )
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<BrokerProbe["Service"], never, KafkaClient> =>
  Effect.gen(function* () {
    const { admin, kafka } = yield* KafkaClient
    return BrokerProbe.of({
      find: (request) => find(kafka, admin, request, options),
      findMany: (request) => findMany(kafka, admin, request, options)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaBrokerProbeOptions = {}): Layer.Layer<BrokerProbe, never, KafkaClient> =>
  Layer.effect(BrokerProbe)(make(options))
