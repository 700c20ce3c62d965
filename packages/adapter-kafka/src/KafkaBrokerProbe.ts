/**
 * `BrokerProbe` on kafkajs: the Kafka layer's `Probe` (did a timed-out send land after all?) over
 * kafkajs. The window's bounds come from a short-lived admin; its records are read by a
 * throwaway consumer (its own group id, nothing committed, read uncommitted so records of open
 * transactions count as "reached the broker"), and the group is deleted afterwards.
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
import type { ProbeError } from "@effect-outbox/core/Errors"
import type { EventId, PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Probe from "@effect-outbox/kafka/Probe"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type Kafkajs from "kafkajs"
import { withEphemeralAdmin } from "./internal/ephemeralAdmin.ts"
import { connectWhenCoordinatorReady } from "./internal/groupCoordinator.ts"
import { toConsumerRecord } from "./internal/records.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { protocol } from "./KafkaErrors.ts"
import { brokerCall } from "./KafkaRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaBrokerProbeOptions extends Probe.ProbeOptions {
  /** Prefix of the throwaway consumer groups (default `effect-outbox-probe`). */
  readonly groupPrefix?: string | undefined
}

/** Offsets on a short-lived admin (see `withEphemeralAdmin`); metadata first, it answers "no such topic" at once. */
const bounds = (kafka: Kafkajs.Kafka, topic: string, timestamp: number) =>
  withEphemeralAdmin(
    kafka,
    (admin) =>
      Effect.gen(function* () {
        yield* brokerCall("metadata", () => admin.fetchTopicMetadata({ topics: [topic] }))
        const ends = yield* brokerCall("topicOffsets", () => admin.fetchTopicOffsets(topic))
        const starts = yield* brokerCall("topicOffsetsByTimestamp", () =>
          admin.fetchTopicOffsetsByTimestamp(topic, timestamp)
        )
        return ends.map(({ high, low, partition }): Probe.PartitionBounds => {
          const since = starts.find((s) => s.partition === partition)?.offset
          return {
            partition,
            low: BigInt(low),
            high: BigInt(high),
            since: since === undefined ? undefined : BigInt(since)
          }
        })
      }),
    (error) => error
  )

/** Reads `ranges` until every one is read or `visit` says stop (the caller bounds the time). */
const readRanges = (
  consumer: Kafkajs.Consumer,
  topic: string,
  ranges: ReadonlyArray<Probe.Range>,
  visit: (record: Probe.Seen) => "continue" | "stop"
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
      for (const range of ranges) {
        try {
          consumer.seek({ topic, partition: range.partition, offset: range.start.toString() })
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
          const range = pending.get(batch.partition)
          if (settled || batch.topic !== topic || range === undefined) return
          for (const message of batch.messages) {
            const offset = BigInt(message.offset)
            if (offset < range.start || offset >= range.end) continue
            if (visit(toConsumerRecord(batch.topic, batch.partition, message)) === "stop") return finish(Effect.void)
          }
          progress(batch.partition, BigInt(batch.lastOffset()))
        }
      })
    }
    run().catch((error) => finish(Effect.fail(error)))
    return Effect.sync(() => {
      settled = true
    })
  })

/** The kafkajs side of the probe: a throwaway consumer per read. */
const driver = (kafka: Kafkajs.Kafka, admin: Kafkajs.Admin, options: KafkaBrokerProbeOptions): Probe.ProbeDriver => ({
  protocol,
  bounds: (topic, timestamp) => bounds(kafka, topic, timestamp),
  scan: (topic, ranges, visit) => {
    const groupId = `${options.groupPrefix ?? "effect-outbox-probe"}-${randomUUID()}`
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
      // A fresh broker's coordinator may still be loading (here, not in the acquire: interruptible).
      (consumer) =>
        connectWhenCoordinatorReady(admin, consumer, groupId).pipe(
          Effect.andThen(readRanges(consumer, topic, ranges, visit))
        ),
      (consumer) =>
        Effect.promise(async () => {
          await consumer.disconnect().catch(() => undefined)
          // The group never committed anything; remove it so probes leave no trace.
          await admin.deleteGroups([groupId]).catch(() => undefined)
        })
    )
  }
})

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
  Probe.find(driver(kafka, admin, options), request, options)

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
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> =>
  Probe.findMany(driver(kafka, admin, options), request, options)

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaBrokerProbeOptions = {}
): Effect.Effect<BrokerProbe["Service"], never, KafkaClient> =>
  Effect.gen(function* () {
    const { admin, kafka } = yield* KafkaClient
    return Probe.make(driver(kafka, admin, options), options)
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaBrokerProbeOptions = {}): Layer.Layer<BrokerProbe, never, KafkaClient> =>
  Layer.effect(BrokerProbe)(make(options))
