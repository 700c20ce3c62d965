/**
 * `BrokerAdmin` over any Kafka client: topic creation, partition counts and growth, and
 * consumer-group offsets for lag. Calls that a starting broker or a moving coordinator fails for a
 * moment are retried (`BrokerRetry`); a layout change is awaited until metadata shows it.
 *
 * @since 0.1.0
 */
import { BrokerAdmin, type GroupOffsets } from "@effect-outbox/core/BrokerAdmin"
import { BrokerAdminError } from "@effect-outbox/core/Errors"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import { brokerCall, liveClock } from "./BrokerRetry.ts"
import type { KafkaDriver } from "./KafkaDriver.ts"
import * as KafkaProtocol from "./KafkaProtocol.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface AdminOptions {
  /** Replication factor of topics `ensureTopic` creates (default 1: a single-node broker). */
  readonly replicationFactor?: number | undefined
  /** How long `ensureTopic` / `growPartitions` wait for the new layout to show in metadata (default 10000). */
  readonly settleTimeoutMillis?: number | undefined
}

/**
 * The topic's partition count from fresh metadata, `None` when the topic does not exist.
 *
 * @since 0.1.0
 * @category operations
 */
export const partitionCount = (
  driver: KafkaDriver,
  topic: string
): Effect.Effect<Option.Option<number>, BrokerAdminError> =>
  brokerCall(driver.protocol, "metadata", () => driver.metadata(topic)).pipe(
    Effect.map((layout) => (layout === undefined ? Option.none() : Option.some(layout.partitions))),
    Effect.catch((error) =>
      driver.protocol.isUnknownTopic(error)
        ? Effect.succeed(Option.none<number>())
        : Effect.fail(driver.protocol.toAdminError("partitionCount", topic, error))
    ),
    Effect.withSpan("kafka.admin.partitionCount", { attributes: { topic } })
  )

/**
 * Metadata can trail a layout change by a moment: polls until it shows at least `atLeast`
 * partitions, on the wall clock (the broker lives in real time, also in tests under a
 * `TestClock`). Errors of the metadata call itself fail at once.
 *
 * @since 0.1.0
 * @category operations
 */
export const awaitPartitions = (driver: KafkaDriver, topic: string, atLeast: number, timeoutMillis: number) =>
  partitionCount(driver, topic).pipe(
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
    Effect.provideService(Clock.Clock, liveClock)
  )

// What a lost creation race, or a topic whose metadata has not reached every broker yet, answers.
const settlingNames = ["TOPIC_ALREADY_EXISTS", KafkaProtocol.UNKNOWN_TOPIC, KafkaProtocol.LEADER_NOT_AVAILABLE]

/**
 * Creates the topic when missing and waits for it to show in metadata. An existing topic is left
 * alone (its partition count is not changed: use `growPartitions`). Concurrent creators all succeed.
 *
 * @since 0.1.0
 * @category operations
 */
export const ensureTopic = (
  driver: KafkaDriver,
  request: { readonly topic: string; readonly partitions: number; readonly configs?: Readonly<Record<string, string>> },
  options: AdminOptions = {}
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
    if (Option.isSome(yield* partitionCount(driver, topic))) return
    const created = yield* brokerCall(driver.protocol, "createTopics", () =>
      driver.createTopic({
        topic,
        partitions,
        replicationFactor: options.replicationFactor ?? 1,
        configs: Object.entries(request.configs ?? {}).map(([name, value]) => ({ name, value }))
      })
    ).pipe(Effect.result)
    if (Result.isFailure(created)) {
      // A concurrent creator won the race, or the topic's metadata has not settled yet: the wait
      // below decides. Anything else (bad config, authorisation) fails now.
      const error = created.failure
      const settles =
        settlingNames.some((name) => driver.protocol.has(error, name)) ||
        driver.protocol.describe(error).includes("already exists")
      if (!settles) return yield* driver.protocol.toAdminError("ensureTopic", topic, error)
    }
    yield* awaitPartitions(driver, topic, 1, options.settleTimeoutMillis ?? 10_000)
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
  driver: KafkaDriver,
  topic: string,
  partitions: number,
  options: AdminOptions = {}
): Effect.Effect<number, BrokerAdminError> =>
  Effect.gen(function* () {
    const current = yield* partitionCount(driver, topic)
    if (Option.isNone(current)) {
      return yield* new BrokerAdminError({
        operation: "growPartitions",
        topic,
        reason: "the topic does not exist; create it with ensureTopic first"
      })
    }
    if (current.value >= partitions) return current.value
    yield* brokerCall(driver.protocol, "createPartitions", () => driver.createPartitions(topic, partitions)).pipe(
      Effect.catch((error) =>
        // INVALID_PARTITIONS is what a lost race looks like: the re-read below decides.
        driver.protocol.has(error, "INVALID_PARTITIONS")
          ? Effect.void
          : Effect.fail(driver.protocol.toAdminError("growPartitions", topic, error))
      )
    )
    return yield* awaitPartitions(driver, topic, partitions, options.settleTimeoutMillis ?? 10_000)
  }).pipe(Effect.withSpan("kafka.admin.growPartitions", { attributes: { topic, partitions } }))

/**
 * The group's committed offset and the log's bounds on every partition of `topics` (existing
 * ones; a missing topic is left out).
 *
 * @since 0.1.0
 * @category operations
 */
export const groupOffsets = (
  driver: KafkaDriver,
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string> }
): Effect.Effect<ReadonlyArray<GroupOffsets>, BrokerAdminError> =>
  Effect.gen(function* () {
    const existing: Array<{ topic: string; partitions: number }> = []
    for (const topic of new Set(request.topics)) {
      const count = yield* partitionCount(driver, topic)
      if (Option.isSome(count)) existing.push({ topic, partitions: count.value })
    }
    if (existing.length === 0) return []
    const perTopic = yield* brokerCall(driver.protocol, "groupOffsets", () =>
      driver.groupOffsets(request.groupId, existing)
    ).pipe(
      Effect.mapError((error) =>
        driver.protocol.toAdminError("groupOffsets", existing.map((e) => e.topic).join(","), error)
      )
    )
    return existing.flatMap(({ topic }, i) =>
      [...perTopic[i]!].sort((a, b) => a.partition - b.partition).map((p) => ({ topic, ...p }))
    )
  }).pipe(Effect.withSpan("kafka.admin.groupOffsets", { attributes: { groupId: request.groupId } }))

/**
 * Sets a member-less group's committed offsets.
 *
 * @since 0.1.0
 * @category operations
 */
export const commitGroupOffsets = (
  driver: KafkaDriver,
  request: {
    readonly groupId: string
    readonly topic: string
    readonly partitions: ReadonlyArray<{ readonly partition: number; readonly offset: string }>
  }
): Effect.Effect<void, BrokerAdminError> =>
  request.partitions.length === 0
    ? Effect.void
    : Effect.tryPromise({
        try: () => driver.commitGroupOffsets(request.groupId, request.topic, request.partitions),
        catch: (error) => driver.protocol.toAdminError("commitGroupOffsets", request.topic, error)
      }).pipe(
        Effect.asVoid,
        Effect.withSpan("kafka.admin.commitGroupOffsets", { attributes: { groupId: request.groupId } })
      )

/**
 * The topic's `retention.ms` (`None` when -1: kept without a time limit).
 *
 * @since 0.1.0
 * @category operations
 */
export const retentionMillis = (
  driver: KafkaDriver,
  topic: string
): Effect.Effect<Option.Option<number>, BrokerAdminError> =>
  Effect.tryPromise({
    try: () => driver.topicConfig(topic, "retention.ms"),
    catch: (error) => driver.protocol.toAdminError("retentionMillis", topic, error)
  }).pipe(
    Effect.map((value) => {
      const millis = value === undefined ? Number.NaN : Number(value)
      return Number.isFinite(millis) && millis >= 0 ? Option.some(millis) : Option.none()
    }),
    Effect.withSpan("kafka.admin.retentionMillis", { attributes: { topic } })
  )

/**
 * Deletes those of `topics` that exist (tests and tooling; not part of the port), ignoring
 * failures. Only existing ones are asked for: a client may retry the deletion of a missing topic
 * for seconds.
 *
 * @since 0.1.0
 * @category operations
 */
export const deleteExisting = (
  client: {
    readonly listTopics: () => Promise<ReadonlyArray<string>>
    readonly deleteTopics: (topics: Array<string>) => Promise<unknown>
  },
  topics: ReadonlyArray<string>
): Effect.Effect<void> =>
  topics.length === 0
    ? Effect.void
    : Effect.promise(async () => {
        const existing = new Set(await client.listTopics().catch(() => [...topics]))
        const doomed = topics.filter((t) => existing.has(t))
        if (doomed.length > 0) await client.deleteTopics(doomed).catch(() => undefined)
      })

/**
 * The `BrokerAdmin` port on a driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: KafkaDriver, options: AdminOptions = {}): BrokerAdmin["Service"] =>
  BrokerAdmin.of({
    brokers: driver.brokers,
    listTopics: driver.listTopics.pipe(Effect.withSpan("kafka.admin.listTopics")),
    partitionCount: (topic) => partitionCount(driver, topic),
    ensureTopic: (request) => ensureTopic(driver, request, options),
    growPartitions: (topic, partitions) => growPartitions(driver, topic, partitions, options),
    groupOffsets: (request) => groupOffsets(driver, request),
    commitGroupOffsets: (request) => commitGroupOffsets(driver, request),
    retentionMillis: (topic) => retentionMillis(driver, topic)
  })
