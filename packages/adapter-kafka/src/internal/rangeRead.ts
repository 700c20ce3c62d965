/**
 * How the probe and the topic reader read on kafkajs: a topic's offsets on a short-lived admin,
 * and known offset ranges read by a throwaway consumer (its own group id, nothing committed, the
 * group deleted afterwards): kafkajs has no group-less "assign" mode.
 */
import type { PartitionBounds, Range } from "@effect-outbox/kafka/Probe"
import * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { brokerCall } from "../KafkaRetry.ts"

/**
 * A kafkajs admin for one operation. Offset lookups make kafkajs remember the topic in the
 * client's metadata "target topics"; once such a topic is deleted, every later metadata refresh
 * of that client fails with UNKNOWN_TOPIC_OR_PARTITION. Doing those lookups on a short-lived
 * admin keeps the shared one clean. Connecting is retried like every broker call (`KafkaRetry`).
 */
const withEphemeralAdmin = <A>(
  kafka: Kafkajs.Kafka,
  use: (admin: Kafkajs.Admin) => Effect.Effect<A, unknown>
): Effect.Effect<A, unknown> =>
  Effect.acquireUseRelease(
    brokerCall("admin.connect", async () => {
      const admin = kafka.admin()
      try {
        await admin.connect()
        return admin
      } catch (error) {
        await admin.disconnect().catch(() => undefined)
        throw error
      }
    }),
    use,
    (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
  )

/**
 * Every partition's log bounds, and with `timestamp` its first offset at or after it, on a
 * short-lived admin. Metadata first: it answers "no such topic" at once, the offsets call retries
 * first.
 */
export const partitionBounds = (
  kafka: Kafkajs.Kafka,
  topic: string,
  timestamp?: number
): Effect.Effect<ReadonlyArray<PartitionBounds>, unknown> =>
  withEphemeralAdmin(kafka, (admin) =>
    Effect.gen(function* () {
      yield* brokerCall("metadata", () => admin.fetchTopicMetadata({ topics: [topic] }))
      const ends = yield* brokerCall("topicOffsets", () => admin.fetchTopicOffsets(topic))
      const starts =
        timestamp === undefined
          ? []
          : yield* brokerCall("topicOffsetsByTimestamp", () => admin.fetchTopicOffsetsByTimestamp(topic, timestamp))
      return ends.map(({ high, low, partition }): PartitionBounds => {
        const since = starts.find((s) => s.partition === partition)?.offset
        return {
          partition,
          low: BigInt(low),
          high: BigInt(high),
          since: since === undefined ? undefined : BigInt(since)
        }
      })
    })
  )

/**
 * Connects `consumer` once its group's coordinator answers an offset lookup, both retried within
 * `KafkaRetry`'s bound. A fresh broker creates its offsets topic on the first group request and
 * loads it a moment later; a consumer that joins before then crashes (NOT_COORDINATOR_FOR_GROUP,
 * GROUP_LOAD_IN_PROGRESS) and restarts. The lookup names no topics, so the admin's metadata
 * targets stay as they were. A failed connect disconnects, so the next attempt starts clean.
 */
const connectWhenCoordinatorReady = (
  admin: Kafkajs.Admin,
  consumer: Kafkajs.Consumer,
  groupId: string
): Effect.Effect<void, unknown> =>
  brokerCall("groupCoordinator", () => admin.fetchOffsets({ groupId })).pipe(
    Effect.andThen(
      brokerCall("consumer.connect", async () => {
        try {
          await consumer.connect()
        } catch (error) {
          await consumer.disconnect().catch(() => undefined)
          throw error
        }
      })
    ),
    Effect.asVoid
  )

/** Reads `ranges` until every one is read or `onBatch` says stop (the caller bounds the time). */
const run = (
  consumer: Kafkajs.Consumer,
  topic: string,
  ranges: ReadonlyArray<Range>,
  onBatch: (partition: number, messages: ReadonlyArray<Kafkajs.KafkaMessage>) => Promise<"continue" | "stop">
): Effect.Effect<void, unknown> =>
  Effect.callback<void, unknown>((resume) => {
    const pending = new Map(ranges.map((r) => [r.partition, r]))
    let settled = false
    const finish = (outcome: Effect.Effect<void, unknown>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    const progress = (partition: number, lastOffset: bigint) => {
      const range = pending.get(partition)
      if (range !== undefined && lastOffset >= range.end - 1n) pending.delete(partition)
      if (pending.size === 0) finish(Effect.void)
    }
    // Batches made only of transaction markers never reach eachBatch: track them here.
    consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => {
      if (payload.topic === topic && payload.batchSize === 0) progress(payload.partition, BigInt(payload.lastOffset))
    })
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) finish(Effect.fail(payload.error))
    })
    // Seek on every join, before the first fetch: a consumer that crashed on a retriable error
    // (a coordinator still loading) restarts and joins again, and a seek right after `run` would
    // then hit a consumer between two runs. Without a seek the consumer starts from the
    // beginning, which only costs time (offsets outside the ranges are skipped).
    consumer.on(consumer.events.GROUP_JOIN, () => {
      for (const range of pending.values()) {
        try {
          consumer.seek({ topic, partition: range.partition, offset: range.start.toString() })
        } catch {
          // the consumer stopped again; its next join seeks
        }
      }
    })
    const start = async () => {
      await consumer.subscribe({ topics: [topic], fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: true,
        eachBatch: async ({ batch }) => {
          const range = pending.get(batch.partition)
          if (settled || batch.topic !== topic || range === undefined) return
          const inRange = batch.messages.filter((m) => BigInt(m.offset) >= range.start && BigInt(m.offset) < range.end)
          if (inRange.length > 0 && (await onBatch(batch.partition, inRange)) === "stop") return finish(Effect.void)
          progress(batch.partition, BigInt(batch.lastOffset()))
        }
      })
    }
    start().catch((error) => finish(Effect.fail(error)))
    return Effect.sync(() => {
      settled = true
    })
  })

export const readRanges = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  topic: string,
  ranges: ReadonlyArray<Range>,
  config: Omit<Kafkajs.ConsumerConfig, "allowAutoTopicCreation">,
  onBatch: (partition: number, messages: ReadonlyArray<Kafkajs.KafkaMessage>) => Promise<"continue" | "stop">
): Effect.Effect<void, unknown> =>
  Effect.acquireUseRelease(
    Effect.sync(() =>
      kafka.consumer({
        allowAutoTopicCreation: false,
        sessionTimeout: 10_000,
        rebalanceTimeout: 10_000,
        heartbeatInterval: 1_000,
        maxWaitTimeInMs: 100,
        ...config
      })
    ),
    // A fresh broker's coordinator may still be loading (here, not in the acquire: interruptible).
    (consumer) =>
      connectWhenCoordinatorReady(admin, consumer, config.groupId).pipe(
        Effect.andThen(run(consumer, topic, ranges, onBatch))
      ),
    (consumer) =>
      Effect.promise(async () => {
        await consumer.disconnect().catch(() => undefined)
        // The group never committed anything; remove it so reads leave no trace.
        await admin.deleteGroups([config.groupId]).catch(() => undefined)
      })
  )
