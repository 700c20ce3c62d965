/**
 * `TopicReader` on kafkajs: reads every retained record of a topic up to the high
 * watermarks seen when the read starts, with a throwaway consumer that commits nothing. Used to
 * inspect and replay dead letters.
 *
 * kafkajs has no group-less "assign" mode, so the reader joins a consumer group of its own
 * (unique id, no commits) and deletes that group when done.
 *
 * @since 0.1.0
 */

import { randomUUID } from "node:crypto"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type Kafkajs from "kafkajs"
import { withEphemeralAdmin } from "./internal/ephemeralAdmin.ts"
import { connectWhenCoordinatorReady } from "./internal/groupCoordinator.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { toConsumerRecord } from "./KafkaConsumerSource.ts"
import { protocol, toConsumerError } from "./KafkaErrors.ts"
import { brokerCall } from "./KafkaRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaTopicReaderOptions {
  /** Records buffered ahead of the stream's consumer (default 1000). */
  readonly bufferSize?: number | undefined
  /** Prefix of the throwaway consumer groups (default `effect-outbox-reader`). */
  readonly groupPrefix?: string | undefined
}

interface Range {
  readonly start: bigint
  readonly end: bigint
}

/**
 * @since 0.1.0
 * @category operations
 */
export const read = (
  kafka: Kafkajs.Kafka,
  admin: Kafkajs.Admin,
  topic: string,
  options: KafkaTopicReaderOptions = {}
): Stream.Stream<ConsumerRecord, ConsumerSourceError> =>
  Stream.callback<ConsumerRecord, ConsumerSourceError>(
    (queue) =>
      Effect.gen(function* () {
        // kafkajs calls back outside any fiber: run what it hands over with the reader's context
        // (its tracer, logger and services), not on a bare default runtime.
        const runPromise = Effect.runPromiseWith(yield* Effect.context<never>())
        const onError = (error: unknown) =>
          protocol.isUnknownTopic(error)
            ? new ConsumerSourceError({ operation: "read", reason: `topic ${topic} does not exist`, retriable: false })
            : toConsumerError("read", error)
        const offsets = yield* withEphemeralAdmin(
          kafka,
          (offsetsAdmin) =>
            // Metadata first: it answers "no such topic" at once, the offsets call retries first.
            brokerCall("metadata", () => offsetsAdmin.fetchTopicMetadata({ topics: [topic] })).pipe(
              Effect.andThen(brokerCall("topicOffsets", () => offsetsAdmin.fetchTopicOffsets(topic))),
              Effect.mapError(onError)
            ),
          onError
        )
        const pending = new Map<number, Range>()
        for (const { partition, low, high } of offsets) {
          if (BigInt(low) < BigInt(high)) pending.set(partition, { start: BigInt(low), end: BigInt(high) })
        }
        if (pending.size === 0) return yield* Queue.end(queue)

        const groupId = `${options.groupPrefix ?? "effect-outbox-reader"}-${randomUUID()}`
        const consumer = yield* Effect.acquireRelease(
          Effect.sync(() =>
            kafka.consumer({
              groupId,
              readUncommitted: false,
              allowAutoTopicCreation: false,
              sessionTimeout: 10_000,
              rebalanceTimeout: 10_000,
              heartbeatInterval: 1_000,
              maxWaitTimeInMs: 100
            })
          ),
          (consumer) =>
            Effect.promise(async () => {
              // A waiting offer must give up, or kafkajs would wait for eachBatch forever.
              Queue.shutdownUnsafe(queue)
              await consumer.disconnect().catch(() => undefined)
              await admin.deleteGroups([groupId]).catch(() => undefined)
            })
        )
        const progress = (partition: number, lastOffset: bigint) => {
          const range = pending.get(partition)
          if (range !== undefined && lastOffset >= range.end - 1n) pending.delete(partition)
          if (pending.size === 0) Queue.endUnsafe(queue)
        }
        // Batches of transaction markers only never reach eachBatch.
        consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => {
          if (payload.topic === topic && payload.batchSize === 0)
            progress(payload.partition, BigInt(payload.lastOffset))
        })
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          if (!payload.restart) Queue.failCauseUnsafe(queue, Cause.fail(toConsumerError("read", payload.error)))
        })
        // Seek on every join, before the first fetch: a consumer that crashed on a retriable
        // error (a coordinator still loading) restarts and joins again, and a seek right after
        // `run` would then hit a consumer between two runs. Without a seek the read starts at
        // the log start, which is where every range starts anyway.
        consumer.on(consumer.events.GROUP_JOIN, () => {
          for (const [partition, range] of pending) {
            try {
              consumer.seek({ topic, partition, offset: range.start.toString() })
            } catch {
              // the consumer stopped again; the next join seeks
            }
          }
        })
        // A fresh broker's group coordinator may still be loading; the wait is bounded.
        yield* connectWhenCoordinatorReady(admin, consumer, groupId).pipe(
          Effect.mapError((error) => toConsumerError("read", error))
        )
        yield* Effect.tryPromise({
          try: async () => {
            await consumer.subscribe({ topics: [topic], fromBeginning: true })
            await consumer.run({
              autoCommit: false,
              eachBatchAutoResolve: true,
              eachBatch: async ({ batch }) => {
                const range = pending.get(batch.partition)
                if (range === undefined || batch.topic !== topic) return
                const records = batch.messages
                  .filter((m) => BigInt(m.offset) >= range.start && BigInt(m.offset) < range.end)
                  .map((m) => toConsumerRecord(batch.topic, batch.partition, m))
                // Waits while the buffer is full: the stream's consumer sets the pace.
                if (records.length > 0) await runPromise(Queue.offerAll(queue, records))
                progress(batch.partition, BigInt(batch.lastOffset()))
              }
            })
          },
          catch: (error) => toConsumerError("read", error)
        })
      }),
    { bufferSize: options.bufferSize ?? 1_000, strategy: "suspend" }
  ).pipe(Stream.withSpan("kafka.topicReader.read", { attributes: { topic } }))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaTopicReaderOptions = {}
): Effect.Effect<TopicReader["Service"], never, KafkaClient> =>
  Effect.gen(function* () {
    const { admin, kafka } = yield* KafkaClient
    return TopicReader.of({ read: (topic) => read(kafka, admin, topic, options) })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaTopicReaderOptions = {}): Layer.Layer<TopicReader, never, KafkaClient> =>
  Layer.effect(TopicReader)(make(options))
