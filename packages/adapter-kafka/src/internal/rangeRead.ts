/**
 * Known offset ranges of one topic read by a throwaway consumer: its own group id, nothing
 * committed, the group deleted afterwards. kafkajs has no group-less "assign" mode; the probe and
 * the topic reader both read this way.
 */
import type { Range } from "@effect-outbox/kafka/Probe"
import * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { connectWhenCoordinatorReady } from "./groupCoordinator.ts"

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
