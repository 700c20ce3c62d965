/**
 * `ConsumerSource` on @platformatic/kafka: a consumer-group member whose records are handed out
 * one partition per batch, and whose offsets move only when the caller commits (after its
 * database transaction committed). Partitions without a committed offset start at the earliest
 * record when `fromBeginning`, else at the end, as with the kafkajs adapter.
 *
 * Differences from the kafkajs adapter (see docs/kafka.md): the client fetches ahead into a
 * stream buffer, so after a rebalance the stream may still hand out buffered records of a
 * partition this member lost; their commits are dropped (counted in `droppedCommits`) and the new
 * owner reads them again from the group's committed offset — at-least-once, deduplicated by the
 * inbox. Such batches are not current (`isCurrent`): a batch is current while no group join
 * happened since its records were fetched and the partition is still assigned. A fetch answered
 * after a join is discarded (its positions are the previous generation's). The client pauses only its
 * whole stream, so `pause` holds a paused partition's records back in the adapter (the other
 * partitions keep flowing) and pauses the whole stream only when more than `maxHeldRecords`
 * wait; a group join drops what was held, since the stream then restarts every partition at the
 * group's committed offset.
 *
 * @since 0.1.0
 */
import { ConsumerSource, type Subscription } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as ConsumerOptions from "@effect-outbox/kafka/ConsumerOptions"
import * as GroupSubscription from "@effect-outbox/kafka/GroupSubscription"
import { Consumer, FetchIsolationLevels } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { patchFetch } from "./internal/abortedRecords.ts"
import { guardFetch } from "./internal/fetchGuard.ts"
import * as Handoff from "./internal/handoff.ts"
import { keepMembership } from "./internal/membership.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { protocol } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticConsumerSourceOptions extends ConsumerOptions.ConsumerOptions {
  /** Most records in one batch (default 1000). */
  readonly maxBatchRecords?: number | undefined
  /** Records of paused partitions held back before the whole stream pauses (default 10000). */
  readonly maxHeldRecords?: number | undefined
}

/**
 * `droppedCommits`: offset commits dropped because the partition was no longer assigned to this
 * member. `toConsumerRecord`: a @platformatic/kafka message as a core `ConsumerRecord` (headers
 * as strings).
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
  client: PlatformaticClient["Service"],
  request: { readonly groupId: string; readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  options: PlatformaticConsumerSourceOptions = {}
): Effect.Effect<Subscription, ConsumerSourceError, Scope.Scope> =>
  Effect.gen(function* () {
    const groupOptions = ConsumerOptions.groupTimings(options)
    const consumer = new Consumer({ ...client.baseOptions, groupId: request.groupId, ...groupOptions })
    // The client's read_committed filter lets some aborted records through (internal/abortedRecords).
    patchFetch(consumer)
    const state = Handoff.makeState(consumer)
    // A fetch answered across a group join would move positions the join reset (internal/fetchGuard).
    guardFetch(consumer, state)
    yield* keepMembership(consumer, state, groupOptions)

    return yield* GroupSubscription.subscribe(
      {
        protocol,
        state,
        start: start(consumer, request, groupOptions, options),
        abort: () => consumer.close(true).catch(() => undefined),
        close: (stream) =>
          Effect.promise(async () => {
            await stream.close().catch(() => undefined)
            // Leave the group (so the next member need not wait out the session), bounded. The
            // bound's timer is cleared once the group is left: a pending one kept the process alive.
            let bound: ReturnType<typeof setTimeout> | undefined
            await Promise.race([
              consumer.close().catch(() => undefined),
              new Promise((resolve) => {
                bound = setTimeout(resolve, 5_000)
              })
            ]).finally(() => clearTimeout(bound))
            await consumer.close(true).catch(() => undefined)
          }),
        batches: (stream) =>
          Handoff.batches(stream, state, {
            maxBatch: options.maxBatchRecords ?? 1_000,
            maxHeld: options.maxHeldRecords ?? 10_000
          }),
        owns: (topic, partition) => Handoff.owns(consumer, topic, partition),
        fetchedByThisMember: Handoff.fetchedByThisMember(consumer, state),
        foreignIsCurrent: false,
        commit: {
          send: (commits) =>
            consumer.commit({
              offsets: commits.map((o) => ({
                topic: o.topic,
                partition: o.partition,
                offset: BigInt(o.offset),
                leaderEpoch: -1
              }))
            })
        },
        setPaused: (partitions, pause) => Handoff.setPaused(state, partitions, pause),
        // Records fetched before a rejoin may be read after it: their generation is the old one.
        groupMetadata: (batch) => {
          const group = state.batchGroup.get(batch)
          return group?.generationId === consumer.generationId ? group : undefined
        }
      },
      { groupId: request.groupId, timeoutMillis: ConsumerOptions.commitTimeoutMillis(options) }
    )
  })

/**
 * Joins the group and opens the stream at the group's committed offsets (`GroupSubscription`
 * retries while the broker is unreachable or starting, and closes the consumer after a start
 * that failed for good).
 */
const start = (
  consumer: Handoff.AnyConsumer,
  request: { readonly topics: ReadonlyArray<string>; readonly fromBeginning?: boolean },
  groupOptions: ConsumerOptions.GroupTimings,
  options: PlatformaticConsumerSourceOptions
): Effect.Effect<Handoff.RawStream, unknown> =>
  Effect.tryPromise({
    try: () =>
      consumer.consume({
        ...groupOptions,
        topics: [...request.topics],
        autocommit: false,
        // Where the group committed; partitions without a committed offset fall back here.
        mode: "committed",
        fallbackMode: request.fromBeginning === false ? "latest" : "earliest",
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
        maxWaitTime: options.maxWaitTimeMillis ?? 5_000,
        ...(options.maxBytesPerPartition === undefined ? {} : { maxBytesPerPartition: options.maxBytesPerPartition })
      }),
    catch: (error) => error
  }).pipe(
    // After a join the client resumes a partition that has no committed offset at its own old
    // fetch position (2.12.1 keeps positions it already had), so a partition this member read
    // ahead, lost before anyone committed it, and got back would skip those records. Forgetting
    // every position before the client's own join handler runs makes it start each partition at
    // the group's committed offset, or the fallback, as a new owner must.
    Effect.tap((stream) =>
      Effect.sync(() => consumer.prependListener("consumer:group:join", () => stream.offsetsToFetch.clear()))
    )
  )

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PlatformaticConsumerSourceOptions = {}
): Effect.Effect<ConsumerSource["Service"], never, PlatformaticClient> =>
  PlatformaticClient.useSync((client) =>
    ConsumerSource.of({ subscribe: (request) => subscribe(client, request, options) })
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticConsumerSourceOptions = {}
): Layer.Layer<ConsumerSource, never, PlatformaticClient> => Layer.effect(ConsumerSource)(make(options))
