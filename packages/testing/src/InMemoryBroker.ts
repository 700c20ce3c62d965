/**
 * An in-memory broker log behind the broker ports: `Publisher`, `BrokerProbe`, `BrokerAdmin` and
 * `ConsumerSource`. Topics have partitions, partitions have append-only logs with string offsets,
 * headers and `Clock` timestamps; consumer groups keep committed offsets. Deterministic, driven by
 * signals rather than sleeps (so `TestClock` never has to move for a record to arrive), with fault
 * injection and an inspection handle.
 *
 * Failures apply per partition batch, as in Kafka: the records one `publish` call sends to one
 * partition are appended together or not at all, so a retry never reorders a partition. The
 * record-batch size limit (`maxMessageBytes`) is checked per batch as the broker does; the
 * publisher splits a partition's records into batches under it, as the Kafka publisher does.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { type ConsumerRecord, ConsumerSource, type OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as MemoryAdmin from "./internal/brokerAdmin.ts"
import * as MemoryConsumerSource from "./internal/brokerConsumerSource.ts"
import * as BrokerEngine from "./internal/brokerEngine.ts"
import * as BrokerOutage from "./internal/brokerOutage.ts"
import * as MemoryProbe from "./internal/brokerProbe.ts"
import * as MemoryPublisher from "./internal/brokerPublisher.ts"

/**
 * How an injected publish fault treats one partition batch.
 *
 * - `"retriable"`: nothing is appended; every record gets a `RetriablePublishError`.
 * - `"lost_ack"`: the records ARE appended, then the caller gets a `RetriablePublishError`
 *   (a timeout after the broker wrote: the case stale recovery's probe exists for).
 * - `"unknown_partition"`: nothing is appended; `UnknownPartitionError` (the partition vanished
 *   from the producer's metadata).
 * - `"permanent"`: nothing is appended; `PermanentPublishError`.
 *
 * @since 0.1.0
 * @category models
 */
export type PublishFault = BrokerEngine.PublishFault

/**
 * The partition batches that match `topic` / `partition` (any when absent): the first `skip`
 * pass untouched, then the next `count` fail with `fault`.
 *
 * @since 0.1.0
 * @category models
 */
export type PublishFaultPlan = BrokerEngine.PublishFaultPlan

/**
 * One partition batch of a `publish` call, as a fault hook sees it.
 *
 * @since 0.1.0
 * @category models
 */
export type PartitionBatch = BrokerEngine.PartitionBatch

/**
 * Non-publish operations a fault can target.
 *
 * @since 0.1.0
 * @category models
 */
export type Operation = BrokerEngine.Operation

/**
 * How the broker answers while it is down (see {@link Control.outage}):
 *
 * - `"refuse"`: at once, connection refused. Publishes fail with `BrokerUnavailableError`, the
 *   probe with `ProbeError`, admin calls with `BrokerAdminError`, subscribes and offset commits
 *   with a retriable `ConsumerSourceError`; consumers receive nothing.
 * - `"timeout"`: the same errors, each after the outage's `timeout` (a broker that accepts the
 *   connection and never answers).
 * - `"freeze"`: calls wait until the outage ends, then are carried out. A publish whose caller
 *   gave up (its own timeout) still appends when the broker comes back: records land late.
 *
 * @since 0.1.0
 * @category models
 */
export type OutageMode = BrokerEngine.OutageMode

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** At most this many records per consumer batch. Default 100. */
  readonly maxBatchSize?: number
  /** Topics that exist from the start, with their partition counts. */
  readonly topics?: Readonly<Record<string, number>>
  /**
   * A delay (on the `Clock`, so `TestClock` drives it) before each `publish` call appends, to
   * let simulations interleave relays with the broker round trip. Default: none.
   */
  readonly publishLatency?: Duration.Input
  /**
   * Kafka's `max.message.bytes`: the broker refuses a record batch (the records one send puts on
   * one partition) larger than this. The publisher splits each partition's records into batches
   * under it, as the Kafka publisher does; a record whose record batch alone is larger fails with
   * `PermanentPublishError` and its neighbours land. Default 1,048,588 (Kafka's default).
   */
  readonly maxMessageBytes?: number
  /**
   * A deliberately wrong configuration, to prove a test catches the behaviour it guards against:
   * `"whole-call-batch"` publishes as kafkajs and an adapter that sends a call's records to a
   * partition as one batch would. The records a call sends to one partition go in one record batch whatever its size; when
   * the broker refuses one partition's batch as too large, every record of the call fails with
   * `PermanentPublishError`, the records of partitions whose batches landed included.
   */
  readonly wrong?: "whole-call-batch"
  /**
   * As the Kafka publisher's `combinePartitions` (default true): a call whose partitions each fit
   * one record batch goes out as one request; when a partition of it fails, the call is sent again
   * per partition and the partitions the broker had written are written twice.
   */
  readonly combinePartitions?: boolean
  /**
   * Consumer groups learn about partitions added to a topic only at their next metadata refresh,
   * this long after the previous one (kafkajs `metadataMaxAge`: 5 minutes by default). Until then
   * the new partitions are assigned to nobody; once they are, a partition without a committed
   * offset is read from the group's reset policy (`fromBeginning`: earliest, else latest), so
   * with "latest" every record written to it before the refresh is skipped. Default: groups see
   * new partitions at once.
   */
  readonly metadataMaxAge?: Duration.Input
  /**
   * The group coordinator of a fresh broker is not ready for this long after the first group
   * operation (Kafka creates `__consumer_offsets` then): consumers receive nothing and offset
   * commits fail with a retriable `ConsumerSourceError` until then. Default: ready at once.
   */
  readonly coordinatorLoad?: Duration.Input
}

/**
 * The control and inspection handle of one in-memory broker.
 *
 * @since 0.1.0
 * @category models
 */
export interface Control {
  /** Every record of one partition, in offset order (empty when it does not exist). */
  readonly log: (topic: string, partition: number) => Effect.Effect<ReadonlyArray<ConsumerRecord>>
  /** Every record of a topic, partition by partition. */
  readonly records: (topic: string) => Effect.Effect<ReadonlyArray<ConsumerRecord>>
  /** Topic → partition count. */
  readonly topics: Effect.Effect<ReadonlyMap<string, number>>
  /** The committed offsets of a consumer group (next offset to read, as Kafka stores it). */
  readonly committed: (groupId: string) => Effect.Effect<ReadonlyArray<OffsetCommit>>
  /** How many live subscriptions a group has. */
  readonly members: (groupId: string) => Effect.Effect<number>
  /** Deletes a topic and its records (committed offsets of its partitions are dropped too). */
  readonly deleteTopic: (topic: string) => Effect.Effect<void>
  /** Creates a topic, or grows it, without going through `BrokerAdmin` faults. */
  readonly createTopic: (topic: string, partitions: number) => Effect.Effect<void>
  /** Appends a publish fault plan; plans are consulted in order. */
  readonly failPublish: (plan: PublishFaultPlan) => Effect.Effect<void>
  /** Consulted for every partition batch before the plans; `undefined` removes it. */
  readonly setPublishHook: (
    hook: ((batch: PartitionBatch) => PublishFault | undefined) | undefined
  ) => Effect.Effect<void>
  /**
   * The next `count` calls of `operation` fail: `"probe"` with `ProbeError`, `"admin"` with
   * `BrokerAdminError`, `"commit"` with a retriable `ConsumerSourceError`, `"poll"` fails the
   * subscription's stream with a retriable `ConsumerSourceError` (what a lost broker connection
   * looks like to a consumer).
   */
  readonly failNext: (request: { readonly operation: Operation; readonly count: number }) => Effect.Effect<void>
  /**
   * Stops the broker: every port answers as {@link OutageMode} says until {@link endOutage}.
   * `timeout` is how long a `"timeout"` call waits before failing (default 30 seconds, the Kafka
   * request timeout). Starting an outage ends the previous one.
   */
  readonly outage: (outage: { readonly mode: OutageMode; readonly timeout?: Duration.Input }) => Effect.Effect<void>
  /** Starts the broker again; frozen calls go through now. */
  readonly endOutage: Effect.Effect<void>
  /** Whether the broker is down. */
  readonly down: Effect.Effect<boolean>
  /**
   * A rebalance of the group: every partition is revoked from its member, members are rotated
   * (with several, partitions change owner) and each member resumes from the group's committed
   * offsets (or its reset policy). Batches already handed out stay in flight: their records are
   * delivered again, and a commit for a partition its member no longer owns is dropped, as the
   * Kafka adapter does. It also refreshes the group's metadata, as a rebalance does.
   */
  readonly rebalance: (groupId: string) => Effect.Effect<void>
  readonly clearFaults: Effect.Effect<void>
  /** How many injected faults have fired so far. */
  readonly faultsFired: Effect.Effect<number>
}

/**
 * The control handle as a service, provided by {@link layer}.
 *
 * @since 0.1.0
 * @category services
 */
export class InMemoryBroker extends Context.Service<InMemoryBroker, Control>()(
  "@effect-outbox/testing/InMemoryBroker"
) {}

/**
 * A broker built by {@link make}: the four port implementations and the control handle.
 *
 * @since 0.1.0
 * @category models
 */
export interface Broker {
  readonly control: Control
  readonly publisher: Publisher["Service"]
  readonly probe: BrokerProbe["Service"]
  readonly admin: BrokerAdmin["Service"]
  readonly consumerSource: ConsumerSource["Service"]
}

/**
 * Creates a fresh broker.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<Broker> => Effect.sync(() => makeUnsafe(options))

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = (options: Options = {}): Broker => {
  const maxBatchSize = Math.max(1, options.maxBatchSize ?? 100)
  const latency = options.publishLatency === undefined ? undefined : Duration.fromInputUnsafe(options.publishLatency)
  const millisOf = (input: Duration.Input | undefined) =>
    input === undefined ? undefined : Duration.toMillis(Duration.fromInputUnsafe(input))
  const engine = BrokerEngine.makeEngine(options.topics ?? {}, {
    metadataMaxAgeMillis: millisOf(options.metadataMaxAge),
    coordinatorLoadMillis: millisOf(options.coordinatorLoad)
  })
  const endOutage = () => {
    const outage = engine.outage
    engine.outage = undefined
    if (outage !== undefined) Deferred.doneUnsafe(outage.ended, Effect.void)
    notify()
  }
  const { createOrGrow, faults, groups, notify, topics } = engine

  const log = (topic: string, partition: number): ReadonlyArray<ConsumerRecord> =>
    (topics.get(topic)?.[partition] ?? []).map((r, offset) =>
      BrokerEngine.toConsumerRecord(topic, partition, offset, r)
    )

  const control: Control = {
    log: (topic, partition) => Effect.sync(() => log(topic, partition)),
    records: (topic) => Effect.sync(() => (topics.get(topic) ?? []).flatMap((_, p) => log(topic, p))),
    topics: Effect.sync(() => new Map([...topics].map(([topic, logs]) => [topic, logs.length]))),
    committed: (groupId) =>
      Effect.sync(() =>
        [...(groups.get(groupId)?.committed ?? new Map<string, number>())].map(([key, offset]) => {
          const slash = key.lastIndexOf("/")
          return { topic: key.slice(0, slash), partition: Number(key.slice(slash + 1)), offset: String(offset) }
        })
      ),
    members: (groupId) => Effect.sync(() => groups.get(groupId)?.members.length ?? 0),
    deleteTopic: (topic) =>
      Effect.sync(() => {
        topics.delete(topic)
        for (const group of groups.values()) {
          for (const key of group.committed.keys())
            if (key.slice(0, key.lastIndexOf("/")) === topic) group.committed.delete(key)
        }
        notify()
      }),
    createTopic: (topic, partitions) => Effect.sync(() => createOrGrow(topic, partitions)),
    failPublish: (plan) =>
      Effect.sync(() => {
        const count = plan.count ?? 1
        if (count > 0) faults.publishPlans.push({ plan, skip: plan.skip ?? 0, remaining: count })
      }),
    setPublishHook: (hook) =>
      Effect.sync(() => {
        faults.publishHook = hook
      }),
    failNext: ({ count, operation }) =>
      Effect.sync(() => {
        faults.operationFaults.set(operation, (faults.operationFaults.get(operation) ?? 0) + count)
      }),
    outage: ({ mode, timeout }) =>
      Effect.sync(() => {
        endOutage()
        engine.outage = { mode, timeoutMillis: millisOf(timeout) ?? 30_000, ended: Deferred.makeUnsafe<void>() }
      }),
    endOutage: Effect.sync(endOutage),
    down: Effect.sync(() => engine.outage !== undefined),
    rebalance: (groupId) =>
      Effect.sync(() => {
        const group = groups.get(groupId)
        if (group === undefined) return
        group.members.push(...group.members.splice(0, 1))
        for (const member of group.members) member.positions.clear()
        group.known.clear()
        notify()
      }),
    clearFaults: Effect.sync(() => {
      faults.publishPlans = []
      faults.publishHook = undefined
      faults.operationFaults = new Map()
    }),
    faultsFired: Effect.sync(() => faults.fired)
  }

  BrokerEngine.engines.set(control, engine)
  return {
    control,
    publisher: BrokerOutage.publisher(
      engine,
      MemoryPublisher.make(
        engine,
        latency,
        options.maxMessageBytes,
        options.wrong === "whole-call-batch" ? "whole-call-batch" : "split",
        options.combinePartitions ?? true
      )
    ),
    probe: BrokerOutage.probe(engine, MemoryProbe.make(engine)),
    admin: BrokerOutage.admin(engine, MemoryAdmin.make(engine)),
    consumerSource: MemoryConsumerSource.make(engine, maxBatchSize)
  }
}

/**
 * The services of an existing broker, so several programs can share it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFrom = (
  broker: Broker
): Layer.Layer<InMemoryBroker | Publisher | BrokerProbe | BrokerAdmin | ConsumerSource> =>
  Layer.mergeAll(
    Layer.succeed(InMemoryBroker)(broker.control),
    Layer.succeed(Publisher)(broker.publisher),
    Layer.succeed(BrokerProbe)(broker.probe),
    Layer.succeed(BrokerAdmin)(broker.admin),
    Layer.succeed(ConsumerSource)(broker.consumerSource)
  )

/**
 * A fresh broker each time the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<InMemoryBroker | Publisher | BrokerProbe | BrokerAdmin | ConsumerSource> =>
  Layer.unwrap(Effect.map(make(options), layerFrom))
