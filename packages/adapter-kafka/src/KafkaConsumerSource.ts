/**
 * `ConsumerSource` on kafkajs: per-partition batches from a consumer group, handed to the
 * stream one at a time, and offsets committed only when the core consumer says so (after its
 * database transaction committed).
 *
 * How a batch travels: kafkajs calls `eachBatch`; the callback hands the batch to the stream and
 * waits, heartbeating, until the stream's consumer pulls the next batch (it finished this one)
 * or the subscription closes (it did not). Only a finished batch moves the fetch position
 * forward; the committed position moves only through `commit`. kafkajs never commits by itself
 * (`autoCommit: false`), so a crash or shutdown redelivers everything after the last commit.
 *
 * Transaction markers and aborted records occupy offsets but are never delivered. A commit at
 * the offset right after the last delivered record of a batch moves past the markers and aborted
 * records that end that batch (and past marker-only batches that follow it), so a group that
 * finished a transactional topic commits its end and shows no lag.
 *
 * Rebalances: a commit for a partition this member no longer owns is dropped (logged and
 * counted), never sent: the new owner resumes from the last committed offset and redelivers,
 * and the idempotent consumer deduplicates. A commit the broker rejects because the group is
 * rebalancing fails with a retriable `ConsumerSourceError`. Every batch remembers the generation
 * it was fetched in; a rebalance starting (a heartbeat or fetch answering
 * `REBALANCE_IN_PROGRESS`) or a new join ends the generation, so `isCurrent` says `false` for
 * every batch delivered before it (kafkajs's eager protocol revokes every partition and resumes
 * each at the group's committed offset).
 *
 * Pausing a partition (`pause`) stops kafkajs fetching it; a batch of it already fetched is
 * abandoned, not handed out, and fetched again after `resume`.
 *
 * @since 0.1.0
 */
import { ConsumerSource, type Subscription } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as ConsumerOptions from "@effect-outbox/kafka/ConsumerOptions"
import * as GroupSubscription from "@effect-outbox/kafka/GroupSubscription"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import type Kafkajs from "kafkajs"
import * as Handoff from "./internal/handoff.ts"
import { KafkaClient } from "./KafkaClient.ts"
import { protocol } from "./KafkaErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KafkaConsumerSourceOptions extends ConsumerOptions.ConsumerOptions {
  /**
   * How old the group's view of topic metadata may get (default 5000 ms; kafkajs default 300000).
   * A topic grown by `PartitionAssignment` or the relay's sync is noticed (and rebalanced onto)
   * within this, so its new partitions are read within seconds.
   */
  readonly metadataMaxAgeMillis?: number | undefined
  /** Extra kafkajs consumer settings (retry, rackId…). */
  readonly consumerConfig?: Partial<Omit<Kafkajs.ConsumerConfig, "groupId">> | undefined
}

/**
 * `droppedCommits`: offset commits dropped because the partition was no longer assigned to this
 * member. `toConsumerRecord`: a kafkajs message as a core `ConsumerRecord` (headers as strings,
 * the value's bytes shared).
 *
 * @since 0.1.0
 */
export { droppedCommits } from "@effect-outbox/kafka/Metrics"
export { toConsumerRecord } from "./internal/records.ts"

/**
 * @since 0.1.0
 * @category constructors
 */
export const subscribe = (
  kafka: Kafkajs.Kafka,
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  options: KafkaConsumerSourceOptions = {}
): Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const state = yield* Handoff.makeState
    const timings = ConsumerOptions.groupTimings(options)
    const { heartbeatInterval } = timings
    const consumer = kafka.consumer({
      ...options.consumerConfig,
      groupId: request.groupId,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      ...timings,
      maxWaitTimeInMs: options.maxWaitTimeMillis ?? 500,
      metadataMaxAge: options.metadataMaxAgeMillis ?? options.consumerConfig?.metadataMaxAge ?? 5_000,
      ...(options.maxBytesPerPartition === undefined ? {} : { maxBytesPerPartition: options.maxBytesPerPartition })
    })
    Handoff.watchGroup(consumer, state)
    return yield* GroupSubscription.subscribe(
      {
        protocol,
        state,
        start: start(consumer, request, state, heartbeatInterval),
        close: () =>
          Effect.promise(async () => {
            // Unblock a waiting eachBatch without moving its position: kafkajs waits for it before
            // leaving the group.
            Handoff.settleAll(state, "abandoned")
            await consumer.disconnect().catch(() => undefined)
          }).pipe(Effect.andThen(Queue.end(state.queue))),
        batches: () => Handoff.batches(state),
        owns: (topic, partition) => Handoff.isAssigned(state, topic, partition),
        foreignIsCurrent: true,
        commit: Handoff.commitHooks(consumer, state),
        setPaused: (partitions, pause) => Handoff.setPaused(consumer, state, partitions, pause)
      },
      { groupId: request.groupId, timeoutMillis: ConsumerOptions.commitTimeoutMillis(options) }
    )
  })

/**
 * Connects, subscribes and starts the consumer; a failed start disconnects first, so the next
 * one (`GroupSubscription` retries while the broker is unreachable or starting) starts clean.
 */
const start = (
  consumer: Kafkajs.Consumer,
  request: { readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  state: Handoff.State,
  heartbeatInterval: number
): Effect.Effect<void, unknown> =>
  Effect.tryPromise({
    try: async () => {
      try {
        await consumer.connect()
        // Only partitions without a committed offset use this: a new group, and partitions added
        // to a grown topic. Starting those at their end would skip what was written before the
        // group noticed them, so the default is their beginning.
        await consumer.subscribe({ topics: [...request.topics], fromBeginning: request.fromBeginning ?? true })
        await consumer.run({
          autoCommit: false,
          eachBatchAutoResolve: false,
          partitionsConsumedConcurrently: 1,
          eachBatch: Handoff.eachBatch(state, heartbeatInterval)
        })
      } catch (error) {
        // The release only runs after a successful acquire: clean up a half-started one.
        await consumer.disconnect().catch(() => undefined)
        throw error
      }
    },
    catch: (error) => error
  })

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: KafkaConsumerSourceOptions = {}
): Effect.Effect<ConsumerSource["Service"], never, KafkaClient> =>
  KafkaClient.useSync(({ kafka }) => ConsumerSource.of({ subscribe: (request) => subscribe(kafka, request, options) }))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: KafkaConsumerSourceOptions = {}): Layer.Layer<ConsumerSource, never, KafkaClient> =>
  Layer.effect(ConsumerSource)(make(options))
