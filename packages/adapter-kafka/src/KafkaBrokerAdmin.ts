/**
 * `BrokerAdmin` on kafkajs: topic creation, partition counts and partition growth,
 * and consumer-group offsets for lag.
 *
 * @since 0.1.0
 */
import { BrokerAdmin, type GroupOffsets } from "@effect-outbox/core/BrokerAdmin"
import { BrokerAdminError } from "@effect-outbox/core/Errors"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type Kafkajs from "kafkajs"
import { KafkaClient } from "./KafkaClient.ts"
import { describe, rootCause, toAdminError } from "./KafkaErrors.ts"
import { brokerCall } from "./KafkaRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaBrokerAdminOptions {
  /** Replication factor of topics created by `ensureTopic` (default 1: a single-node broker). */
  readonly replicationFactor?: number | undefined
  /** How long `ensureTopic` / `growPartitions` wait for the new layout to show in metadata. */
  readonly settleTimeoutMillis?: number | undefined
}

const isUnknownTopic = (error: unknown) => rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION"

/**
 * The topic's partition count from fresh metadata, `None` when the topic does not exist.
 *
 * @since 0.1.0
 * @category operations
 */
export const partitionCount = (
  admin: Kafkajs.Admin,
  topic: string
): Effect.Effect<Option.Option<number>, BrokerAdminError> =>
  brokerCall("metadata", () => admin.fetchTopicMetadata({ topics: [topic] })).pipe(
    Effect.map((metadata) => {
      const found = metadata.topics.find((t) => t.name === topic)
      return found === undefined ? Option.none() : Option.some(found.partitions.length)
    }),
    Effect.catch((error) =>
      isUnknownTopic(error)
        ? Effect.succeed(Option.none<number>())
        : Effect.fail(toAdminError("partitionCount", topic, error))
    ),
    Effect.withSpan("kafka.admin.partitionCount", { attributes: { topic } })
  )

/**
 * Metadata can trail a layout change by a moment; wait until it shows what we just asked for.
 * Polls on the live clock (not the fiber's `Clock`): the broker lives in real time, also in tests
 * that run under a `TestClock`. Errors of the metadata call itself fail at once.
 */
const awaitPartitions = (admin: Kafkajs.Admin, topic: string, atLeast: number, timeoutMillis: number) =>
  partitionCount(admin, topic).pipe(
    Effect.filterOrFail(
      (count): count is Option.Some<number> => Option.isSome(count) && count.value >= atLeast,
      (count) =>
        new BrokerAdminError({
          operation: "awaitPartitions",
          topic,
          reason: `metadata shows ${Option.isSome(count) ? count.value : "no topic"} partitions, expected ${atLeast}, after ${timeoutMillis} ms`
        })
    ),
    Effect.retry({
      schedule: Schedule.spaced("50 millis").pipe(Schedule.upTo({ duration: Duration.millis(timeoutMillis) })),
      while: (error) => error.operation === "awaitPartitions"
    }),
    Effect.map((count) => count.value),
    Effect.provideService(Clock.Clock, Clock.Clock.defaultValue())
  )

/**
 * Creates the topic when missing and waits for its leaders. An existing topic is left alone
 * (its partition count is not changed: use `growPartitions`). Concurrent creators all succeed.
 *
 * @since 0.1.0
 * @category operations
 */
export const ensureTopic = (
  admin: Kafkajs.Admin,
  request: { readonly topic: string; readonly partitions: number; readonly configs?: Readonly<Record<string, string>> },
  options: KafkaBrokerAdminOptions = {}
): Effect.Effect<void, BrokerAdminError> =>
  Effect.gen(function* () {
    const { topic, partitions } = request
    if (!Number.isInteger(partitions) || partitions < 1) {
      return yield* new BrokerAdminError({
        operation: "ensureTopic",
        topic,
        reason: `partitions must be a positive integer, got ${partitions}`
      })
    }
    const existing = yield* partitionCount(admin, topic)
    if (Option.isSome(existing)) return
    const created = yield* brokerCall("createTopics", () =>
      admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic,
            numPartitions: partitions,
            replicationFactor: options.replicationFactor ?? 1,
            configEntries: Object.entries(request.configs ?? {}).map(([name, value]) => ({ name, value }))
          }
        ]
      })
    ).pipe(Effect.result)
    if (Result.isFailure(created)) {
      // A concurrent creator won the race (TOPIC_ALREADY_EXISTS), or the topic exists but its
      // metadata has not reached every broker yet (UNKNOWN_TOPIC_OR_PARTITION, no leader):
      // the wait below settles it. Anything else (bad config, authorisation) fails now.
      const type = rootCause(created.failure).type
      const settles =
        type === "TOPIC_ALREADY_EXISTS" ||
        type === "UNKNOWN_TOPIC_OR_PARTITION" ||
        type === "LEADER_NOT_AVAILABLE" ||
        describe(created.failure).includes("already exists")
      if (!settles) return yield* toAdminError("ensureTopic", topic, created.failure)
    }
    yield* awaitPartitions(admin, topic, 1, options.settleTimeoutMillis ?? 10_000)
  }).pipe(
    Effect.withSpan("kafka.admin.ensureTopic", { attributes: { topic: request.topic, partitions: request.partitions } })
  )

/**
 * Grows the topic to at least `partitions` and returns the count the broker then reports.
 * Never shrinks. "Already has N partitions" from a concurrent grow is success.
 *
 * @since 0.1.0
 * @category operations
 */
export const growPartitions = (
  admin: Kafkajs.Admin,
  topic: string,
  partitions: number,
  options: KafkaBrokerAdminOptions = {}
): Effect.Effect<number, BrokerAdminError> =>
  Effect.gen(function* () {
    const current = yield* partitionCount(admin, topic)
    if (Option.isNone(current)) {
      return yield* new BrokerAdminError({
        operation: "growPartitions",
        topic,
        reason: "the topic does not exist; create it with ensureTopic first"
      })
    }
    if (current.value >= partitions) return current.value
    yield* brokerCall("createPartitions", () =>
      admin.createPartitions({ topicPartitions: [{ topic, count: partitions }] })
    ).pipe(
      Effect.catch((error) =>
        // INVALID_PARTITIONS is what a lost race looks like ("already has N partitions"): the
        // re-read below decides whether the topic is now big enough.
        rootCause(error).type === "INVALID_PARTITIONS"
          ? Effect.void
          : Effect.fail(toAdminError("growPartitions", topic, error))
      )
    )
    return yield* awaitPartitions(admin, topic, partitions, options.settleTimeoutMillis ?? 10_000)
  }).pipe(Effect.withSpan("kafka.admin.growPartitions", { attributes: { topic, partitions } }))

/**
 * The group's committed offset and the log's bounds on every partition of `topics` (existing
 * ones; a missing topic is left out), from the group coordinator and the partition leaders.
 * The end offset is read with the client's isolation level (read-committed by default), the
 * same view the consumer has.
 *
 * @since 0.1.0
 * @category operations
 */
export const groupOffsets = (
  admin: Kafkajs.Admin,
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string> }
): Effect.Effect<ReadonlyArray<GroupOffsets>, BrokerAdminError> =>
  Effect.gen(function* () {
    const existing: Array<string> = []
    for (const topic of new Set(request.topics)) {
      if (Option.isSome(yield* partitionCount(admin, topic))) existing.push(topic)
    }
    if (existing.length === 0) return []
    const [committed, bounds] = yield* brokerCall("groupOffsets", () =>
      Promise.all([
        admin.fetchOffsets({ groupId: request.groupId, topics: existing }),
        Promise.all(existing.map((topic) => admin.fetchTopicOffsets(topic)))
      ])
    ).pipe(Effect.mapError((error) => toAdminError("groupOffsets", existing.join(","), error)))
    const out: Array<GroupOffsets> = []
    existing.forEach((topic, i) => {
      const positions = new Map(
        (committed.find((c) => c.topic === topic)?.partitions ?? []).map((p) => [p.partition, p.offset])
      )
      for (const partition of [...bounds[i]!].sort((a, b) => a.partition - b.partition)) {
        const offset = positions.get(partition.partition)
        out.push({
          topic,
          partition: partition.partition,
          // Kafka answers -1 for "no committed offset".
          committed: offset === undefined || BigInt(offset) < 0n ? null : offset,
          start: partition.low,
          end: partition.high
        })
      }
    })
    return out
  }).pipe(Effect.withSpan("kafka.admin.groupOffsets", { attributes: { groupId: request.groupId } }))

/**
 * Sets a group's committed offsets (`setOffsets`; the group must have no live members).
 *
 * @since 0.1.0
 * @category operations
 */
export const commitGroupOffsets = (
  admin: Kafkajs.Admin,
  request: {
    readonly groupId: string
    readonly topic: string
    readonly partitions: ReadonlyArray<{ readonly partition: number; readonly offset: string }>
  }
): Effect.Effect<void, BrokerAdminError> =>
  request.partitions.length === 0
    ? Effect.void
    : Effect.tryPromise({
        try: () =>
          admin.setOffsets({
            groupId: request.groupId,
            topic: request.topic,
            partitions: request.partitions.map((p) => ({ partition: p.partition, offset: p.offset }))
          }),
        catch: (error) => toAdminError("commitGroupOffsets", request.topic, error)
      }).pipe(Effect.withSpan("kafka.admin.commitGroupOffsets", { attributes: { groupId: request.groupId } }))

/**
 * Every topic on the broker, asked once on a short-lived admin that does not retry (kafkajs's
 * default would try for about ten seconds, logging each failed connection): the caller bounds
 * the wait and retries. Also connects nothing the shared admin would keep.
 *
 * @since 0.3.0
 * @category operations
 */
export const listTopics = (kafka: Kafkajs.Kafka): Effect.Effect<ReadonlyArray<string>, BrokerAdminError> =>
  Effect.tryPromise({
    try: async () => {
      const admin = kafka.admin({ retry: { retries: 0 } })
      try {
        await admin.connect()
        return await admin.listTopics()
      } finally {
        await admin.disconnect().catch(() => undefined)
      }
    },
    catch: (error) => new BrokerAdminError({ operation: "listTopics", topic: "*", reason: describe(error) })
  }).pipe(Effect.withSpan("kafka.admin.listTopics"))

/**
 * Deletes topics (tests and tooling; not part of the port). Missing topics are ignored.
 *
 * @since 0.1.0
 * @category operations
 */
export const deleteTopics = (admin: Kafkajs.Admin, topics: ReadonlyArray<string>): Effect.Effect<void> =>
  topics.length === 0
    ? Effect.void
    : Effect.promise(async () => {
        // kafkajs retries the deletion of a missing topic for seconds: ask for existing ones only.
        const existing = new Set(await admin.listTopics().catch(() => [...topics]))
        const doomed = topics.filter((t) => existing.has(t))
        if (doomed.length > 0) await admin.deleteTopics({ topics: doomed, timeout: 10_000 }).catch(() => undefined)
      })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaBrokerAdminOptions = {}
): Effect.Effect<BrokerAdmin["Service"], never, KafkaClient> =>
  Effect.gen(function* () {
    const { admin, brokers, kafka } = yield* KafkaClient
    return BrokerAdmin.of({
      brokers,
      listTopics: listTopics(kafka),
      partitionCount: (topic) => partitionCount(admin, topic),
      ensureTopic: (request) => ensureTopic(admin, request, options),
      growPartitions: (topic, partitions) => growPartitions(admin, topic, partitions, options),
      groupOffsets: (request) => groupOffsets(admin, request),
      commitGroupOffsets: (request) => commitGroupOffsets(admin, request)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaBrokerAdminOptions = {}): Layer.Layer<BrokerAdmin, never, KafkaClient> =>
  Layer.effect(BrokerAdmin)(make(options))
