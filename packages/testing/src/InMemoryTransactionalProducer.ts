/**
 * `TransactionalProducer` over the in-memory broker: a transaction's records and its
 * group offsets are applied in one uninterruptible, synchronous step — all or nothing, never
 * half — and an injected abort changes nothing at all, like an aborted Kafka transaction seen by
 * a `read_committed` consumer.
 *
 * As Kafka does, a transaction aborts, not retriable, when a record's topic or partition does not
 * exist, when its offsets name a topic or partition that does not exist, when a partition's
 * records exceed the broker's default `max.message.bytes` (Kafka sends them as one record batch),
 * and when a newer producer over the same broker took its `transactionalId` (fencing).
 *
 * The broker's publish fault plans are not meant for transactional topics: a transaction checks
 * its targets first and then cannot fail half-way; use {@link Control.failNext} to abort
 * transactions instead.
 *
 * @since 0.1.0
 */
import { ConsumerSource, type Subscription } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as RecordSize from "@effect-outbox/core/RecordSize"
import {
  TransactionAbortedError,
  TransactionalProducer,
  type TransactionRequest
} from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { InMemoryBroker } from "./InMemoryBroker.ts"
import { type BrokerEngine, engines, memberIdOf, tp } from "./internal/brokerEngine.ts"
import { assignment, groupOf } from "./internal/brokerGroups.ts"
import { brokerAccepts } from "./internal/brokerPublisher.ts"

/**
 * The producer epochs of each broker's transactional ids, as Kafka's transaction coordinator
 * keeps them: keyed by the broker's control handle, so it lives and dies with that broker.
 */
const epochs = new WeakMap<InMemoryBroker["Service"], Map<string, number>>()

/** Why Kafka would refuse `request`, checked before anything of it is applied. */
const refusal = (request: TransactionRequest, topics: ReadonlyMap<string, number>): string | undefined => {
  const batches = new Map<string, Array<RecordSize.SizedRecord>>()
  for (const [i, record] of request.records.entries()) {
    const partitions = topics.get(record.topic)
    if (partitions === undefined) return `topic ${record.topic} does not exist`
    if (record.partition !== null && (record.partition < 0 || record.partition >= partitions)) {
      return `topic ${record.topic} has no partition ${record.partition}`
    }
    // One record batch per partition, as Kafka sends a transaction's records; a keyed record
    // is counted with its key's (the same partition), an unkeyed one alone.
    const slot = `${record.topic}\u0000${record.partition ?? (record.key === null ? `record ${i}` : `key ${record.key}`)}`
    batches.set(slot, [...(batches.get(slot) ?? []), record])
  }
  for (const [slot, records] of batches) {
    if (!brokerAccepts(records, RecordSize.DEFAULT_MAX_MESSAGE_BYTES)) {
      return `MESSAGE_TOO_LARGE: the records for ${slot.split("\u0000")[0]} exceed max.message.bytes`
    }
  }
  for (const offset of request.offsets) {
    const partitions = topics.get(offset.topic)
    if (partitions === undefined || offset.partition < 0 || offset.partition >= partitions) {
      return `UNKNOWN_TOPIC_OR_PARTITION: cannot commit offsets of ${offset.topic}/${offset.partition}`
    }
  }
  return undefined
}

/**
 * The group coordinator's check of a transaction's offsets against the membership they were
 * fetched under (Kafka's `UNKNOWN_MEMBER_ID` / `ILLEGAL_GENERATION`).
 */
const groupRefusal = (engine: BrokerEngine, request: TransactionRequest): string | undefined => {
  if (request.group === undefined) return undefined
  const { generationId, memberId } = request.group
  const member = groupOf(engine, request.groupId).members.find((m) => !m.closed && memberIdOf(m) === memberId)
  if (member === undefined) return `UNKNOWN_MEMBER_ID: ${memberId} is not a member of ${request.groupId}`
  const owned = assignment(engine, member)
  for (const { partition, topic } of request.offsets) {
    const assigned = owned.some((o) => o.topic === topic && o.partition === partition)
    if (!assigned || member.assignments.get(tp(topic, partition)) !== generationId) {
      return `ILLEGAL_GENERATION: ${topic}/${partition} is not assigned to ${memberId} in generation ${generationId}`
    }
  }
  return undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Control {
  /** The next `count` transactions abort (retriable unless said otherwise) before changing anything. */
  readonly failNext: (count: number, options?: { readonly retriable?: boolean }) => Effect.Effect<void>
  readonly committed: Effect.Effect<number>
  readonly aborted: Effect.Effect<number>
}

/**
 * @since 0.1.0
 * @category services
 */
export class InMemoryTransactions extends Context.Service<InMemoryTransactions, Control>()(
  "@effect-outbox/testing/InMemoryTransactions"
) {}

/**
 * A transactional producer on the broker in context. Offsets are committed through a
 * topic-less member of the group (it owns no partition, so it never disturbs assignment).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  transactionalId = "in-memory-transactional-producer"
): Layer.Layer<TransactionalProducer | InMemoryTransactions, never, InMemoryBroker | ConsumerSource | Publisher> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker
      const source = yield* ConsumerSource
      const publisher = yield* Publisher
      const scope = yield* Effect.scope
      const committers = new Map<string, Subscription>()
      let pendingFaults: Array<boolean> = []
      let committed = 0
      let aborted = 0
      // Taking the id fences every older producer of it on this broker.
      const registry = epochs.get(broker) ?? new Map<string, number>()
      epochs.set(broker, registry)
      const epoch = (registry.get(transactionalId) ?? 0) + 1
      registry.set(transactionalId, epoch)

      const committer = (groupId: string) =>
        Effect.gen(function* () {
          const existing = committers.get(groupId)
          if (existing !== undefined) return existing
          const subscription = yield* source.subscribe({ groupId, topics: [] }).pipe(Scope.provide(scope))
          committers.set(groupId, subscription)
          return subscription
        }).pipe(Effect.orDie)

      const abort = (reason: string, retriable: boolean, groupFenced?: boolean) => {
        aborted++
        return Effect.fail(
          new TransactionAbortedError({ transactionalId, reason, retriable, ...(groupFenced ? { groupFenced } : {}) })
        )
      }

      const engine = engines.get(broker)!
      const producer: TransactionalProducer["Service"] = {
        transactionalId,
        fencing: {
          _tag: "Group",
          // The in-memory transaction applies in one step: nothing is ever pending.
          committedOffset: ({ groupId, partition, topic }) =>
            Effect.sync(() => {
              const offset = groupOf(engine, groupId).committed.get(tp(topic, partition))
              return offset === undefined ? undefined : String(offset)
            })
        },
        commit: (request) =>
          Effect.uninterruptible(
            Effect.gen(function* () {
              const members = yield* committer(request.groupId)
              if (registry.get(transactionalId) !== epoch) {
                return yield* abort("PRODUCER_FENCED: a newer producer took this transactionalId", false)
              }
              const fault = pendingFaults.shift()
              if (fault !== undefined) return yield* abort("injected abort", fault)
              const refused = refusal(request, yield* broker.topics)
              if (refused !== undefined) return yield* abort(refused, false)
              // A member fenced by a rebalance: this transaction can never succeed.
              const fenced = groupRefusal(engine, request)
              if (fenced !== undefined) return yield* abort(fenced, false, true)
              // From here nothing can fail: both halves are applied back to back.
              const outcomes = yield* publisher.publish(request.records)
              const receipts = outcomes.map((outcome) => {
                if (outcome._tag === "Failure") {
                  throw new Error(
                    `in-memory transaction half-applied: ${outcome.failure.message} (do not combine broker publish faults with transactions)`
                  )
                }
                return outcome.success
              })
              yield* members.commit(request.offsets).pipe(Effect.orDie)
              committed++
              return receipts
            })
          )
      }

      const control: Control = {
        failNext: (count, options) =>
          Effect.sync(() => {
            pendingFaults = [...pendingFaults, ...Array.from({ length: count }, () => options?.retriable ?? true)]
          }),
        committed: Effect.sync(() => committed),
        aborted: Effect.sync(() => aborted)
      }

      return Context.make(TransactionalProducer, producer).pipe(Context.add(InMemoryTransactions, control))
    })
  )
