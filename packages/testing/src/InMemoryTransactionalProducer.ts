/**
 * `TransactionalProducer` over the in-memory broker (R7.1): a transaction's records and its
 * group offsets are applied in one uninterruptible, synchronous step — all or nothing, never
 * half — and an injected abort changes nothing at all, like an aborted Kafka transaction seen by
 * a `read_committed` consumer.
 *
 * The broker's publish fault plans are not meant for transactional topics: a transaction checks
 * its targets first and then cannot fail half-way; use {@link Control.failNext} to abort
 * transactions instead.
 *
 * @since 0.1.0
 */
import { ConsumerSource, type Subscription } from "@effect-outbox/core/ConsumerSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TransactionAbortedError, TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { InMemoryBroker } from "./InMemoryBroker.ts"

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

      const committer = (groupId: string) =>
        Effect.gen(function* () {
          const existing = committers.get(groupId)
          if (existing !== undefined) return existing
          const subscription = yield* source.subscribe({ groupId, topics: [] }).pipe(Scope.provide(scope))
          committers.set(groupId, subscription)
          return subscription
        }).pipe(Effect.orDie)

      const abort = (reason: string, retriable: boolean) => {
        aborted++
        return Effect.fail(new TransactionAbortedError({ transactionalId, reason, retriable }))
      }

      const producer: TransactionalProducer["Service"] = {
        transactionalId,
        commit: (request) =>
          Effect.uninterruptible(
            Effect.gen(function* () {
              const members = yield* committer(request.groupId)
              const fault = pendingFaults.shift()
              if (fault !== undefined) return yield* abort("injected abort", fault)
              const topics = yield* broker.topics
              for (const record of request.records) {
                const partitions = topics.get(record.topic)
                if (partitions === undefined) return yield* abort(`topic ${record.topic} does not exist`, false)
                if (record.partition !== null && (record.partition < 0 || record.partition >= partitions)) {
                  return yield* abort(`topic ${record.topic} has no partition ${record.partition}`, false)
                }
              }
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
