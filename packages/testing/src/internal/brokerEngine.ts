/**
 * The state every in-memory broker port shares: topic logs, consumer groups, the change signal
 * waiting consumers sleep on, and fault injection.
 *
 * @internal
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { Headers } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"

// The fault vocabulary lives here, with the engine that applies it; InMemoryBroker re-exports
// it (with its documentation) so that no internal module imports the public one.
export type PublishFault = "retriable" | "lost_ack" | "unknown_partition" | "permanent"

export interface PublishFaultPlan {
  readonly fault: PublishFault
  readonly count?: number
  readonly skip?: number
  readonly topic?: string
  readonly partition?: number
  readonly reason?: string
}

export interface PartitionBatch {
  readonly topic: string
  readonly partition: number
  readonly requests: ReadonlyArray<PublishRequest>
}

export type Operation = "probe" | "admin" | "commit" | "poll"

export interface StoredRecord {
  readonly key: string | null
  readonly headers: Headers
  readonly value: Uint8Array
  readonly timestamp: number
}

export interface Member {
  readonly id: number
  readonly groupId: string
  readonly topics: ReadonlyArray<string>
  readonly fromBeginning: boolean
  /** `topic/partition` → next offset this member will fetch. */
  readonly positions: Map<string, number>
  /** `topic/partition` → the assignment it belongs to (a new number each time it is assigned). */
  readonly assignments: Map<string, number>
  /** `topic/partition`s not fetched until resumed. */
  readonly paused: Set<string>
  cursor: number
  closed: boolean
}

export interface Group {
  /** `topic/partition` → committed offset (the next one to read). */
  readonly committed: Map<string, number>
  /** Live members, in join order. */
  readonly members: Array<Member>
  /**
   * Topic → partition count as the group last read it from the metadata (used only when the
   * broker models a metadata refresh delay): partitions added since are not assigned yet.
   */
  readonly known: Map<string, number>
  /** When the group last refreshed its metadata (Clock millis). */
  refreshedAt: number
}

/**
 * How the broker answers while it is down:
 * - `"refuse"`: at once, connection refused;
 * - `"timeout"`: after `timeoutMillis`, request timed out;
 * - `"freeze"`: not until the outage ends; then the request is carried out (late).
 */
export type OutageMode = "refuse" | "timeout" | "freeze"

export interface Outage {
  readonly mode: OutageMode
  readonly timeoutMillis: number
  /** Completed when the outage ends. */
  readonly ended: Deferred.Deferred<void>
}

export interface Faults {
  publishPlans: Array<{ plan: PublishFaultPlan; skip: number; remaining: number }>
  publishHook: ((batch: PartitionBatch) => PublishFault | undefined) | undefined
  operationFaults: Map<Operation, number>
  fired: number
}

export interface BrokerEngine {
  /** The current outage, if the broker is down. */
  outage: Outage | undefined
  /** Metadata refresh delay of consumer groups (millis); `undefined`: they see new partitions at once. */
  readonly metadataMaxAgeMillis: number | undefined
  /** How long after the first group operation the group coordinator is not ready (millis). */
  readonly coordinatorLoadMillis: number | undefined
  /** When the coordinator is ready (Clock millis), fixed by the first group operation. */
  coordinatorReadyAt: number | undefined
  readonly topics: Map<string, Array<Array<StoredRecord>>>
  readonly groups: Map<string, Group>
  readonly faults: Faults
  /** Completed (and replaced) on every change a waiting consumer may care about. */
  readonly signal: () => Deferred.Deferred<void>
  readonly notify: () => void
  readonly createOrGrow: (topic: string, partitions: number) => void
  readonly publishFault: (
    batch: PartitionBatch
  ) => { readonly fault: PublishFault; readonly reason: string } | undefined
  readonly operationFault: (operation: Operation) => boolean
}

export const tp = (topic: string, partition: number) => `${topic}/${partition}`

export const toConsumerRecord = (
  topic: string,
  partition: number,
  offset: number,
  r: StoredRecord
): ConsumerRecord => ({
  topic,
  partition,
  offset: String(offset),
  key: r.key,
  headers: r.headers,
  value: r.value,
  timestamp: r.timestamp
})

/** Each broker's engine by its control handle, for the in-memory transactional producer's fence. */
export const engines = new WeakMap<object, BrokerEngine>()

/** Each member's id as group metadata reports it: unique across the consumer sources of a broker. */
const memberIds = new WeakMap<Member, string>()
let nextMemberId = 0
export const memberIdOf = (member: Member): string => {
  let id = memberIds.get(member)
  if (id === undefined) {
    id = `member-${++nextMemberId}`
    memberIds.set(member, id)
  }
  return id
}

export const makeEngine = (
  initialTopics: Readonly<Record<string, number>>,
  timing: {
    readonly metadataMaxAgeMillis?: number | undefined
    readonly coordinatorLoadMillis?: number | undefined
  } = {}
): BrokerEngine => {
  const topics = new Map<string, Array<Array<StoredRecord>>>()
  const groups = new Map<string, Group>()
  const faults: Faults = { publishPlans: [], publishHook: undefined, operationFaults: new Map(), fired: 0 }

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
  for (const [topic, partitions] of Object.entries(initialTopics)) createOrGrow(topic, partitions)

  const publishFault = (batch: PartitionBatch): { fault: PublishFault; reason: string } | undefined => {
    const hooked = faults.publishHook?.(batch)
    if (hooked !== undefined) {
      faults.fired++
      return { fault: hooked, reason: `injected ${hooked} fault` }
    }
    const index = faults.publishPlans.findIndex(
      ({ plan }) =>
        (plan.topic === undefined || plan.topic === batch.topic) &&
        (plan.partition === undefined || plan.partition === batch.partition)
    )
    if (index < 0) return undefined
    const entry = faults.publishPlans[index]!
    if (entry.skip > 0) {
      entry.skip--
      return undefined
    }
    entry.remaining--
    if (entry.remaining <= 0) faults.publishPlans.splice(index, 1)
    faults.fired++
    return { fault: entry.plan.fault, reason: entry.plan.reason ?? `injected ${entry.plan.fault} fault` }
  }

  const operationFault = (operation: Operation): boolean => {
    const remaining = faults.operationFaults.get(operation) ?? 0
    if (remaining <= 0) return false
    faults.operationFaults.set(operation, remaining - 1)
    faults.fired++
    return true
  }

  return {
    outage: undefined,
    metadataMaxAgeMillis: timing.metadataMaxAgeMillis,
    coordinatorLoadMillis: timing.coordinatorLoadMillis,
    coordinatorReadyAt: undefined,
    topics,
    groups,
    faults,
    signal: () => signal,
    notify,
    createOrGrow,
    publishFault,
    operationFault
  }
}
