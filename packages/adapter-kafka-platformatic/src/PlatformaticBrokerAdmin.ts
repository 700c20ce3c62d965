/**
 * `BrokerAdmin` on @platformatic/kafka: topics, partitions and consumer-group offsets, with the
 * same contract as the kafkajs adapter's `KafkaBrokerAdmin`.
 *
 * @since 0.1.0
 */
import { BrokerAdmin, type GroupOffsets } from "@effect-outbox/core/BrokerAdmin"
import { BrokerAdminError } from "@effect-outbox/core/Errors"
import type { Admin, Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, isUnknownTopic, leaves, protocolTypes, toAdminError } from "./PlatformaticErrors.ts"
import { brokerCall } from "./PlatformaticRetry.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticBrokerAdminOptions {
  /** Replication factor of topics `ensureTopic` creates (default 1). */
  readonly replicationFactor?: number | undefined
  /** How long to wait for a new topic or partitions to show in metadata (default 10000). */
  readonly settleTimeoutMillis?: number | undefined
}

/**
 * The topic's partition count from fresh metadata, `None` when the topic does not exist.
 *
 * @since 0.1.0
 * @category operations
 */
export const partitionCount = (admin: Admin, topic: string): Effect.Effect<Option.Option<number>, BrokerAdminError> =>
  brokerCall("metadata", () => admin.metadata({ topics: [topic], forceUpdate: true })).pipe(
    Effect.map((metadata) => {
      const found = metadata.topics.get(topic)
      return found === undefined ? Option.none() : Option.some(found.partitionsCount)
    }),
    Effect.catch((error) =>
      isUnknownTopic(error)
        ? Effect.succeed(Option.none<number>())
        : Effect.fail(toAdminError("partitionCount", topic, error))
    ),
    Effect.withSpan("kafka.admin.partitionCount", { attributes: { topic } })
  )

const awaitPartitions = (admin: Admin, topic: string, atLeast: number, timeoutMillis: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMillis
    while (true) {
      const count = yield* partitionCount(admin, topic)
      if (Option.isSome(count) && count.value >= atLeast) return count.value
      if (Date.now() >= deadline) {
        return yield* new BrokerAdminError({
          operation: "awaitPartitions",
          topic,
          reason: `metadata shows ${Option.isSome(count) ? count.value : "no topic"} partitions, expected ${atLeast}, after ${timeoutMillis} ms`
        })
      }
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
  })

/**
 * Every topic on the broker, asked once (the client's own few retries only): the caller bounds
 * the wait and retries.
 *
 * @since 0.3.0
 * @category operations
 */
export const listTopics = (admin: Admin): Effect.Effect<ReadonlyArray<string>, BrokerAdminError> =>
  Effect.tryPromise({
    try: () => admin.listTopics(),
    catch: (error) => new BrokerAdminError({ operation: "listTopics", topic: "*", reason: withSocketCauses(error) })
  }).pipe(Effect.withSpan("kafka.admin.listTopics"))

// A failed connection's leaf says only "Connection to host:port failed."; its cause says why
// (ECONNREFUSED, ENOTFOUND, …), which is what an operator acts on.
const withSocketCauses = (error: unknown): string => {
  const causes = leaves(error).flatMap((leaf) => (leaf.cause instanceof Error ? [leaf.cause.message] : []))
  const unique = [...new Set(causes)]
  return unique.length === 0 ? describe(error) : `${describe(error)}: ${unique.join("; ")}`
}

/**
 * Creates the topic unless it exists (an existing topic is left as it is); concurrent callers
 * all succeed.
 *
 * @since 0.1.0
 * @category operations
 */
export const ensureTopic = (
  admin: Admin,
  request: { readonly topic: string; readonly partitions: number; readonly configs?: Readonly<Record<string, string>> },
  options: PlatformaticBrokerAdminOptions = {}
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
        topics: [topic],
        partitions,
        replicas: options.replicationFactor ?? 1,
        configs: Object.entries(request.configs ?? {}).map(([name, value]) => ({ name, value }))
      })
    ).pipe(Effect.result)
    if (Result.isFailure(created)) {
      // A concurrent creator won the race, or the topic's metadata has not settled yet: the wait
      // below decides. Anything else (bad config, authorisation) fails now.
      const types = protocolTypes(created.failure)
      const settles =
        types.has("TOPIC_ALREADY_EXISTS") ||
        types.has("UNKNOWN_TOPIC_OR_PARTITION") ||
        types.has("LEADER_NOT_AVAILABLE")
      if (!settles) return yield* toAdminError("ensureTopic", topic, created.failure)
    }
    yield* awaitPartitions(admin, topic, 1, options.settleTimeoutMillis ?? 10_000)
  }).pipe(
    Effect.withSpan("kafka.admin.ensureTopic", { attributes: { topic: request.topic, partitions: request.partitions } })
  )

/**
 * Grows the topic to at least `partitions` (never shrinks it); answers the count it has.
 *
 * @since 0.1.0
 * @category operations
 */
export const growPartitions = (
  admin: Admin,
  topic: string,
  partitions: number,
  options: PlatformaticBrokerAdminOptions = {}
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
      admin.createPartitions({ topics: [{ name: topic, count: partitions }] })
    ).pipe(
      Effect.catch((error) =>
        // INVALID_PARTITIONS is what a lost race looks like: the re-read below decides.
        protocolTypes(error).has("INVALID_PARTITIONS")
          ? Effect.void
          : Effect.fail(toAdminError("growPartitions", topic, error))
      )
    )
    return yield* awaitPartitions(admin, topic, partitions, options.settleTimeoutMillis ?? 10_000)
  }).pipe(Effect.withSpan("kafka.admin.growPartitions", { attributes: { topic, partitions } }))

/**
 * Per partition of the existing topics among `topics`: the group's committed offset (`null` when
 * none) and the log's start and end.
 *
 * @since 0.1.0
 * @category operations
 */
export const groupOffsets = (
  admin: Admin,
  offsets: Consumer,
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string> }
): Effect.Effect<ReadonlyArray<GroupOffsets>, BrokerAdminError> =>
  Effect.gen(function* () {
    const existing: Array<{ topic: string; partitions: number }> = []
    for (const topic of new Set(request.topics)) {
      const count = yield* partitionCount(admin, topic)
      if (Option.isSome(count)) existing.push({ topic, partitions: count.value })
    }
    if (existing.length === 0) return []
    const topics = existing.map((e) => e.topic)
    const [committed, starts, ends] = yield* brokerCall("groupOffsets", () =>
      Promise.all([
        admin.listConsumerGroupOffsets({
          groups: [
            {
              groupId: request.groupId,
              topics: existing.map((e) => ({
                name: e.topic,
                partitionIndexes: Array.from({ length: e.partitions }, (_, i) => i)
              }))
            }
          ]
        }),
        offsets.listOffsets({ topics, timestamp: -2n }),
        offsets.listOffsets({ topics, timestamp: -1n })
      ])
    ).pipe(Effect.mapError((error) => toAdminError("groupOffsets", topics.join(","), error)))
    const out: Array<GroupOffsets> = []
    for (const { partitions, topic } of existing) {
      const positions = new Map(
        (committed[0]?.topics.find((t) => t.name === topic)?.partitions ?? []).map((p) => [
          p.partitionIndex,
          p.committedOffset
        ])
      )
      for (let partition = 0; partition < partitions; partition++) {
        const offset = positions.get(partition)
        out.push({
          topic,
          partition,
          // Kafka answers -1 for "no committed offset".
          committed: offset === undefined || offset < 0n ? null : offset.toString(),
          start: (starts.get(topic)?.[partition] ?? 0n).toString(),
          end: (ends.get(topic)?.[partition] ?? 0n).toString()
        })
      }
    }
    return out
  }).pipe(Effect.withSpan("kafka.admin.groupOffsets", { attributes: { groupId: request.groupId } }))

/**
 * Sets a member-less group's committed offsets.
 *
 * @since 0.1.0
 * @category operations
 */
export const commitGroupOffsets = (
  admin: Admin,
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
          admin.alterConsumerGroupOffsets({
            groupId: request.groupId,
            topics: [
              {
                name: request.topic,
                partitionOffsets: request.partitions.map((p) => ({ partition: p.partition, offset: BigInt(p.offset) }))
              }
            ]
          }),
        catch: (error) => toAdminError("commitGroupOffsets", request.topic, error)
      }).pipe(Effect.withSpan("kafka.admin.commitGroupOffsets", { attributes: { groupId: request.groupId } }))

/**
 * Deletes the topics that exist among `topics`; failures are ignored (test and tool cleanup).
 *
 * @since 0.1.0
 * @category operations
 */
export const deleteTopics = (admin: Admin, topics: ReadonlyArray<string>): Effect.Effect<void> =>
  topics.length === 0
    ? Effect.void
    : Effect.promise(async () => {
        const existing = new Set(await admin.listTopics().catch(() => [...topics]))
        const doomed = topics.filter((t) => existing.has(t))
        if (doomed.length > 0) await admin.deleteTopics({ topics: doomed }).catch(() => undefined)
      }).pipe(Effect.tapDefect((defect) => Effect.logDebug(`deleteTopics: ${describe(defect)}`)))

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticBrokerAdminOptions = {}
): Effect.Effect<BrokerAdmin["Service"], never, PlatformaticClient> =>
  Effect.gen(function* () {
    const { admin, brokers, offsets } = yield* PlatformaticClient
    return BrokerAdmin.of({
      brokers,
      listTopics: listTopics(admin),
      partitionCount: (topic) => partitionCount(admin, topic),
      ensureTopic: (request) => ensureTopic(admin, request, options),
      growPartitions: (topic, partitions) => growPartitions(admin, topic, partitions, options),
      groupOffsets: (request) => groupOffsets(admin, offsets, request),
      commitGroupOffsets: (request) => commitGroupOffsets(admin, request)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticBrokerAdminOptions = {}
): Layer.Layer<BrokerAdmin, never, PlatformaticClient> => Layer.effect(BrokerAdmin)(make(options))
