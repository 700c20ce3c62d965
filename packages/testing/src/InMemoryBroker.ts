/**
 * An in-memory broker log behind the broker ports: `Publisher`, `BrokerProbe`, `BrokerAdmin` and
 * `ConsumerSource`. Topics have partitions, partitions have append-only logs with string offsets,
 * headers and `Clock` timestamps; consumer groups keep committed offsets. Deterministic, driven by
 * signals rather than sleeps (so `TestClock` never has to move for a record to arrive), with fault
 * injection and an inspection handle.
 *
 * Failures apply per partition batch, as in Kafka: the records one `publish` call sends to one
 * partition are appended together or not at all, so a retry never reorders a partition.
 *
 * @since 0.1.0
 */
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import {
  type ConsumerBatch,
  type ConsumerRecord,
  ConsumerSource,
  type OffsetCommit,
  type Subscription
} from "@effect-outbox/core/ConsumerSource"
import {
  BrokerAdminError,
  ConsumerSourceError,
  PermanentPublishError,
  ProbeError,
  type PublishError,
  RetriablePublishError,
  UnknownPartitionError
} from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type Headers, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishOutcome, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { partitionForKey } from "./internal/murmur2.ts"

/**
 * How an injected publish fault treats one partition batch.
 *
 * - `"retriable"`: nothing is appended; every record gets a `RetriablePublishError`.
 * - `"lost_ack"`: the records ARE appended, then the caller gets a `RetriablePublishError`
 *   (a timeout after the broker wrote: the case stale recovery's probe exists for, R3.2).
 * - `"unknown_partition"`: nothing is appended; `UnknownPartitionError` (the partition vanished
 *   from the producer's metadata).
 * - `"permanent"`: nothing is appended; `PermanentPublishError`.
 *
 * @since 0.1.0
 * @category models
 */
export type PublishFault = "retriable" | "lost_ack" | "unknown_partition" | "permanent"

/**
 * The partition batches that match `topic` / `partition` (any when absent): the first `skip`
 * pass untouched, then the next `count` fail with `fault`.
 *
 * @since 0.1.0
 * @category models
 */
export interface PublishFaultPlan {
  readonly fault: PublishFault
  readonly count?: number
  readonly skip?: number
  readonly topic?: string
  readonly partition?: number
  readonly reason?: string
}

/**
 * One partition batch of a `publish` call, as a fault hook sees it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PartitionBatch {
  readonly topic: string
  readonly partition: number
  readonly requests: ReadonlyArray<PublishRequest>
}

/**
 * Non-publish operations a fault can target.
 *
 * @since 0.1.0
 * @category models
 */
export type Operation = "probe" | "admin" | "commit" | "poll"

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

interface StoredRecord {
  readonly key: string | null
  readonly headers: Headers
  readonly value: Uint8Array
  readonly timestamp: number
}

interface Member {
  readonly id: number
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning: boolean
  /** `topic/partition` → next offset this member will fetch. */
  readonly positions: Map<string, number>
  cursor: number
  closed: boolean
}

interface Group {
  readonly committed: Map<string, number>
  readonly members: Array<Member>
}

const tp = (topic: string, partition: number) => `${topic}/${partition}`

const toConsumerRecord = (topic: string, partition: number, offset: number, r: StoredRecord): ConsumerRecord => ({
  topic,
  partition,
  offset: String(offset),
  key: r.key,
  headers: r.headers,
  value: r.value,
  timestamp: r.timestamp
})

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
  const topics = new Map<string, Array<Array<StoredRecord>>>()
  const groups = new Map<string, Group>()
  const roundRobin = new Map<string, number>()
  let nextMemberId = 1

  // Every change a waiting consumer may care about (append, grow, membership) completes the
  // current signal and installs a fresh one.
  let signal = Deferred.makeUnsafe<void>()
  const notify = () => {
    const fired = signal
    signal = Deferred.makeUnsafe<void>()
    Deferred.doneUnsafe(fired, Effect.void)
  }

  const createOrGrow = (topic: string, partitions: number) => {
    const logs = topics.get(topic) ?? []
    while (logs.length < partitions) logs.push([])
    topics.set(topic, logs)
    notify()
  }
  for (const [topic, partitions] of Object.entries(options.topics ?? {})) createOrGrow(topic, partitions)

  // ------------------------------------------------------------------------------------------
  // Faults
  // ------------------------------------------------------------------------------------------

  let publishPlans: Array<{ plan: PublishFaultPlan; skip: number; remaining: number }> = []
  let publishHook: ((batch: PartitionBatch) => PublishFault | undefined) | undefined
  let operationFaults = new Map<Operation, number>()
  let fired = 0

  const publishFault = (batch: PartitionBatch): { fault: PublishFault; reason: string } | undefined => {
    const hooked = publishHook?.(batch)
    if (hooked !== undefined) {
      fired++
      return { fault: hooked, reason: `injected ${hooked} fault` }
    }
    const index = publishPlans.findIndex(
      ({ plan }) =>
        (plan.topic === undefined || plan.topic === batch.topic) &&
        (plan.partition === undefined || plan.partition === batch.partition)
    )
    if (index < 0) return undefined
    const entry = publishPlans[index]!
    if (entry.skip > 0) {
      entry.skip--
      return undefined
    }
    entry.remaining--
    if (entry.remaining <= 0) publishPlans.splice(index, 1)
    fired++
    return { fault: entry.plan.fault, reason: entry.plan.reason ?? `injected ${entry.plan.fault} fault` }
  }

  const operationFault = (operation: Operation): boolean => {
    const remaining = operationFaults.get(operation) ?? 0
    if (remaining <= 0) return false
    operationFaults.set(operation, remaining - 1)
    fired++
    return true
  }

  // ------------------------------------------------------------------------------------------
  // Publisher
  // ------------------------------------------------------------------------------------------

  const publish = (requests: ReadonlyArray<PublishRequest>, now: number): ReadonlyArray<PublishOutcome> => {
    const outcomes = new Array<PublishOutcome>(requests.length)
    // Partition batches in order of first appearance; each keeps its records in request order.
    const batches = new Map<string, { topic: string; partition: number; indices: Array<number> }>()
    requests.forEach((request, index) => {
      const logs = topics.get(request.topic)
      if (logs === undefined) {
        outcomes[index] = Result.fail(
          new PermanentPublishError({
            topic: request.topic,
            reason: "the topic does not exist (topics are not auto-created: create it with BrokerAdmin.ensureTopic)"
          })
        )
        return
      }
      let partition: number
      if (request.partition !== null) {
        partition = request.partition
        if (!Number.isInteger(partition) || partition < 0 || partition >= logs.length) {
          outcomes[index] = Result.fail(
            new UnknownPartitionError({ topic: request.topic, partition, partitionCount: logs.length })
          )
          return
        }
      } else if (request.key !== null) {
        partition = partitionForKey(request.key, logs.length)
      } else {
        const counter = (roundRobin.get(request.topic) ?? -1) + 1
        roundRobin.set(request.topic, counter)
        partition = counter % logs.length
      }
      const key = tp(request.topic, partition)
      const batch = batches.get(key) ?? { topic: request.topic, partition, indices: [] }
      batch.indices.push(index)
      batches.set(key, batch)
    })
    let appended = false
    for (const { indices, partition, topic } of batches.values()) {
      const fault = publishFault({ topic, partition, requests: indices.map((i) => requests[i]!) })
      const failWith = (error: PublishError) => {
        for (const i of indices) outcomes[i] = Result.fail(error)
      }
      if (fault !== undefined && fault.fault !== "lost_ack") {
        switch (fault.fault) {
          case "retriable":
            failWith(new RetriablePublishError({ topic, reason: fault.reason }))
            break
          case "permanent":
            failWith(new PermanentPublishError({ topic, reason: fault.reason }))
            break
          case "unknown_partition":
            failWith(new UnknownPartitionError({ topic, partition }))
            break
        }
        continue
      }
      const log = topics.get(topic)![partition]!
      for (const i of indices) {
        const request = requests[i]!
        const offset = log.length
        log.push({
          key: request.key,
          headers: { ...request.headers },
          value: new Uint8Array(request.payload),
          timestamp: now
        })
        outcomes[i] = Result.succeed({ topic, partition, offset: String(offset) })
      }
      appended = true
      if (fault !== undefined) {
        failWith(new RetriablePublishError({ topic, reason: `${fault.reason}: acknowledgement lost after append` }))
      }
    }
    if (appended) notify()
    return outcomes
  }

  const publisher: Publisher["Service"] = {
    publish: (requests) =>
      Effect.andThen(
        latency === undefined ? Effect.void : Effect.sleep(latency),
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => publish(requests, now)))
      )
  }

  // ------------------------------------------------------------------------------------------
  // BrokerProbe
  // ------------------------------------------------------------------------------------------

  const probe: BrokerProbe["Service"] = {
    find: (request) =>
      Effect.suspend(() => {
        if (operationFault("probe")) {
          return Effect.fail(new ProbeError({ topic: request.topic, reason: "injected probe fault" }))
        }
        const logs = topics.get(request.topic)
        if (logs === undefined) return Effect.succeed(Option.none<PublishReceipt>())
        if (request.partition !== null && (request.partition < 0 || request.partition >= logs.length)) {
          return Effect.fail(
            new ProbeError({
              topic: request.topic,
              reason: `partition ${request.partition} does not exist (the topic has ${logs.length})`
            })
          )
        }
        const partitions = request.partition === null ? logs.map((_, p) => p) : [request.partition]
        for (const partition of partitions) {
          const log = logs[partition]!
          for (let offset = 0; offset < log.length; offset++) {
            const record = log[offset]!
            if (record.timestamp >= request.since && record.headers[EVENT_ID_HEADER] === request.eventId) {
              return Effect.succeed(Option.some({ topic: request.topic, partition, offset: String(offset) }))
            }
          }
        }
        return Effect.succeed(Option.none<PublishReceipt>())
      })
  }

  // ------------------------------------------------------------------------------------------
  // BrokerAdmin
  // ------------------------------------------------------------------------------------------

  const adminFault = (operation: string, topic: string) =>
    operationFault("admin")
      ? Effect.fail(new BrokerAdminError({ operation, topic, reason: "injected admin fault" }))
      : Effect.void

  const admin: BrokerAdmin["Service"] = {
    partitionCount: (topic) =>
      Effect.andThen(
        adminFault("partitionCount", topic),
        Effect.sync(() => Option.fromUndefinedOr(topics.get(topic)?.length))
      ),
    ensureTopic: (request) =>
      Effect.andThen(
        adminFault("ensureTopic", request.topic),
        Effect.suspend(() => {
          if (!Number.isInteger(request.partitions) || request.partitions < 1) {
            return Effect.fail(
              new BrokerAdminError({
                operation: "ensureTopic",
                topic: request.topic,
                reason: `a topic needs at least one partition (asked for ${request.partitions})`
              })
            )
          }
          if (!topics.has(request.topic)) createOrGrow(request.topic, request.partitions)
          return Effect.void
        })
      ),
    growPartitions: (topic, partitions) =>
      Effect.andThen(
        adminFault("growPartitions", topic),
        Effect.suspend(() => {
          const logs = topics.get(topic)
          if (logs === undefined) {
            return Effect.fail(
              new BrokerAdminError({
                operation: "growPartitions",
                topic,
                reason: "the topic does not exist: create it with ensureTopic first"
              })
            )
          }
          if (partitions > logs.length) createOrGrow(topic, partitions)
          return Effect.succeed(topics.get(topic)!.length)
        })
      )
  }

  // ------------------------------------------------------------------------------------------
  // ConsumerSource
  // ------------------------------------------------------------------------------------------

  const groupOf = (groupId: string): Group => {
    let group = groups.get(groupId)
    if (group === undefined) {
      group = { committed: new Map(), members: [] }
      groups.set(groupId, group)
    }
    return group
  }

  /**
   * The partitions a member owns now: per topic, partition `p` goes to the `p mod n`-th live
   * member subscribed to it, in join order. Recomputed on every fetch, so joins, leaves and
   * partition growth rebalance at once.
   */
  const assignment = (member: Member): Array<{ topic: string; partition: number }> => {
    const group = groupOf(member.groupId)
    const owned: Array<{ topic: string; partition: number }> = []
    for (const topic of member.topics) {
      const logs = topics.get(topic)
      if (logs === undefined) continue
      const subscribers = group.members.filter((m) => m.topics.includes(topic))
      const index = subscribers.indexOf(member)
      for (let partition = 0; partition < logs.length; partition++) {
        if (partition % subscribers.length === index) owned.push({ topic, partition })
      }
    }
    return owned
  }

  /** Positions start at the group's committed offset, else the beginning or the end. */
  const syncPositions = (member: Member, owned: ReadonlyArray<{ topic: string; partition: number }>) => {
    const group = groupOf(member.groupId)
    const keys = new Set(owned.map((o) => tp(o.topic, o.partition)))
    for (const key of member.positions.keys()) if (!keys.has(key)) member.positions.delete(key)
    for (const { partition, topic } of owned) {
      const key = tp(topic, partition)
      if (member.positions.has(key)) continue
      const committed = group.committed.get(key)
      const end = topics.get(topic)![partition]!.length
      member.positions.set(key, committed ?? (member.fromBeginning ? 0 : end))
    }
  }

  const nextBatch = (member: Member): ConsumerBatch | undefined => {
    const owned = assignment(member)
    syncPositions(member, owned)
    for (let i = 0; i < owned.length; i++) {
      const index = (member.cursor + i) % owned.length
      const { partition, topic } = owned[index]!
      const key = tp(topic, partition)
      const position = member.positions.get(key)!
      const log = topics.get(topic)![partition]!
      if (position >= log.length) continue
      const upTo = Math.min(log.length, position + maxBatchSize)
      const records: Array<ConsumerRecord> = []
      for (let offset = position; offset < upTo; offset++) {
        records.push(toConsumerRecord(topic, partition, offset, log[offset]!))
      }
      member.positions.set(key, upTo)
      member.cursor = index + 1
      return { topic, partition, records }
    }
    return undefined
  }

  const consumerSource: ConsumerSource["Service"] = {
    subscribe: (options) =>
      Effect.gen(function* () {
        const member = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const member: Member = {
              id: nextMemberId++,
              groupId: options.groupId,
              topics: [...new Set(options.topics)].sort(),
              fromBeginning: options.fromBeginning ?? false,
              positions: new Map(),
              cursor: 0,
              closed: false
            }
            const group = groupOf(options.groupId)
            group.members.push(member)
            // Positions are fixed when the member joins, as Kafka resolves them on assignment.
            syncPositions(member, assignment(member))
            notify()
            return member
          }),
          (member) =>
            Effect.sync(() => {
              member.closed = true
              const group = groupOf(member.groupId)
              group.members.splice(group.members.indexOf(member), 1)
              notify()
            })
        )
        const pull: Effect.Effect<readonly [ConsumerBatch], Cause.Done | ConsumerSourceError> = Effect.gen(
          function* () {
            while (true) {
              if (member.closed) return yield* Cause.done()
              if (operationFault("poll")) {
                return yield* new ConsumerSourceError({
                  operation: "poll",
                  reason: "injected poll fault",
                  retriable: true
                })
              }
              const waitFor = signal
              const batch = nextBatch(member)
              if (batch !== undefined) return [batch] as const
              yield* Deferred.await(waitFor)
            }
          }
        )
        const subscription: Subscription = {
          batches: Stream.fromPull(Effect.succeed(pull)),
          commit: (offsets) =>
            Effect.suspend(() => {
              if (operationFault("commit")) {
                return Effect.fail(
                  new ConsumerSourceError({ operation: "commit", reason: "injected commit fault", retriable: true })
                )
              }
              if (member.closed) {
                return Effect.fail(
                  new ConsumerSourceError({
                    operation: "commit",
                    reason: "the subscription was closed; its uncommitted records go to the next member",
                    retriable: false
                  })
                )
              }
              const group = groupOf(member.groupId)
              for (const commit of offsets) {
                const offset = Number(commit.offset)
                if (!Number.isSafeInteger(offset) || offset < 0) {
                  return Effect.fail(
                    new ConsumerSourceError({
                      operation: "commit",
                      reason: `offset ${commit.offset} of ${commit.topic}/${commit.partition} is not a valid offset`,
                      retriable: false
                    })
                  )
                }
              }
              for (const commit of offsets)
                group.committed.set(tp(commit.topic, commit.partition), Number(commit.offset))
              return Effect.void
            })
        }
        return subscription
      })
  }

  // ------------------------------------------------------------------------------------------
  // Control
  // ------------------------------------------------------------------------------------------

  const log = (topic: string, partition: number): ReadonlyArray<ConsumerRecord> =>
    (topics.get(topic)?.[partition] ?? []).map((r, offset) => toConsumerRecord(topic, partition, offset, r))

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
        if (count > 0) publishPlans.push({ plan, skip: plan.skip ?? 0, remaining: count })
      }),
    setPublishHook: (hook) =>
      Effect.sync(() => {
        publishHook = hook
      }),
    failNext: ({ count, operation }) =>
      Effect.sync(() => {
        operationFaults.set(operation, (operationFaults.get(operation) ?? 0) + count)
      }),
    clearFaults: Effect.sync(() => {
      publishPlans = []
      publishHook = undefined
      operationFaults = new Map()
    }),
    faultsFired: Effect.sync(() => fired)
  }

  return { control, publisher, probe, admin, consumerSource }
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
