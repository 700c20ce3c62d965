/**
 * `TransactionalProducer` over any Kafka client: records and a consumer group's offsets committed
 * in one Kafka transaction, one transaction at a time. After any failure the next transaction
 * starts on a fresh producer, whose `InitProducerId` bumps the epoch and aborts whatever the old
 * one left open. The client supplies a {@link TransactionDriver}: its producer and one
 * transaction run to its commit (aborted on any failure).
 *
 * @since 0.1.0
 */
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import {
  type Fencing,
  TransactionAbortedError,
  TransactionalProducer,
  type TransactionRequest
} from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import { groupFencedNames, type Protocol, transactionFencedNames } from "./KafkaProtocol.ts"

/**
 * A transaction refused before any broker call (a partition the topic does not have): final.
 *
 * @since 0.1.0
 * @category models
 */
export class Refused {
  readonly reason: string
  constructor(reason: string) {
    this.reason = reason
  }
}

/**
 * What a committed transaction reports: every record's partition, each partition's base offset.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sent {
  readonly partitions: ReadonlyArray<number>
  readonly offsets: ReadonlyArray<{ readonly topic: string; readonly partition: number; readonly offset: bigint }>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface TransactionDriver<P> {
  readonly protocol: Protocol
  readonly create: () => P
  /** Runs `InitProducerId`, which fences any older producer of the id (default: nothing to do). */
  readonly connect?: ((producer: P) => Promise<void>) | undefined
  readonly close: (producer: P) => Promise<void>
  /** One transaction to its commit; a failed one is aborted (when still open) and rethrown. */
  readonly run: (producer: P, request: TransactionRequest) => Promise<Sent>
  /**
   * How the client fences a member that lost its partitions: it sends the request's group
   * metadata with the offsets and reads a partition's committed offset once it is stable (no
   * open transaction holds one), or it cannot, and says why.
   */
  readonly fencing:
    | {
        readonly committedOffset: (request: {
          readonly groupId: string
          readonly topic: string
          readonly partition: number
        }) => Promise<string | undefined>
      }
    | { readonly unsupported: string }
}

/**
 * Every record's partition: its own (refused when the topic lacks it), the Java client's murmur2
 * partition of its key, or round robin. `countOf` answers each topic's partition count.
 *
 * @since 0.1.0
 * @category partitioning
 */
export const partitionsFor = (
  request: TransactionRequest,
  countOf: (topic: string) => number
): ReadonlyArray<number> => {
  const roundRobin = new Map<string, number>()
  return request.records.map((record) => {
    const count = countOf(record.topic)
    if (record.partition !== null) {
      if (Number.isInteger(record.partition) && record.partition >= 0 && record.partition < count) {
        return record.partition
      }
      throw new Refused(`topic ${record.topic} has no partition ${record.partition} (it has ${count})`)
    }
    if (record.key !== null) return keyPartition(record.key, count)
    const next = roundRobin.get(record.topic) ?? 0
    roundRobin.set(record.topic, next + 1)
    return next % count
  })
}

/**
 * Each record's receipt: its partition's base offset plus its place among that partition's records.
 *
 * @since 0.1.0
 * @category encoding
 */
export const receipts = (request: TransactionRequest, result: Sent): ReadonlyArray<PublishReceipt> => {
  const base = new Map(result.offsets.map((o) => [`${o.topic}\u0000${o.partition}`, o.offset]))
  const next = new Map<string, bigint>()
  return request.records.map((record, i): PublishReceipt => {
    const slot = `${record.topic}\u0000${result.partitions[i]}`
    const index = next.get(slot) ?? 0n
    next.set(slot, index + 1n)
    return {
      topic: record.topic,
      partition: result.partitions[i]!,
      offset: ((base.get(slot) ?? 0n) + index).toString()
    }
  })
}

/** Why a transaction failed, and whether running it again on a fresh producer may succeed. */
const verdict = (protocol: Protocol, transactionalId: string, error: unknown): TransactionAbortedError => {
  const aborted = (reason: string, retriable: boolean, groupFenced?: boolean) =>
    new TransactionAbortedError({ transactionalId, reason, retriable, ...(groupFenced ? { groupFenced } : {}) })
  if (error instanceof TransactionAbortedError) return error
  if (error instanceof Refused) return aborted(error.reason, false)
  if (protocol.isUnknownTopic(error)) return aborted(`a topic does not exist: ${protocol.describe(error)}`, false)
  // The group refused the offsets of a member that left its generation: the same transaction
  // can never succeed; the pipeline drops the batch (it comes again under the new generation).
  if ([...groupFencedNames].some((name) => protocol.has(error, name))) {
    return aborted(`the group refused this member's offsets: ${protocol.describe(error)}`, false, true)
  }
  const fenced = [...transactionFencedNames].some((name) => protocol.has(error, name))
  return aborted(protocol.describe(error), !fenced && protocol.isRetriable(error))
}

/**
 * The port over a driver. `commitTimeoutMillis` bounds one `commit`, retries included.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P>(
  driver: TransactionDriver<P>,
  options: { readonly transactionalId: string; readonly commitTimeoutMillis?: number | undefined }
): Effect.Effect<TransactionalProducer["Service"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const { transactionalId } = options
    const lock = yield* Semaphore.make(1)
    let producer: P | undefined
    const acquire = Effect.suspend(() => {
      if (producer !== undefined) return Effect.succeed(producer)
      const fresh = driver.create()
      return Effect.tryPromise({ try: async () => driver.connect?.(fresh), catch: (error) => error }).pipe(
        Effect.tapError(() => Effect.promise(() => driver.close(fresh).catch(() => undefined))),
        Effect.map(() => (producer = fresh))
      )
    })
    const reset = Effect.suspend(() => {
      const old = producer
      producer = undefined
      return old === undefined ? Effect.void : Effect.promise(() => driver.close(old).catch(() => undefined))
    })
    yield* Effect.addFinalizer(() => lock.withPermits(1)(reset))
    const timeout = options.commitTimeoutMillis

    const commit = (
      request: TransactionRequest
    ): Effect.Effect<ReadonlyArray<PublishReceipt>, TransactionAbortedError> =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            if (request.records.length === 0 && request.offsets.length === 0) return []
            const running = Effect.flatMap(acquire, (p) =>
              Effect.tryPromise({ try: () => driver.run(p, request), catch: (error) => error })
            )
            const result = yield* (
              timeout === undefined
                ? running
                : running.pipe(
                    Effect.timeoutOrElse({
                      duration: timeout,
                      orElse: () =>
                        Effect.fail(
                          new TransactionAbortedError({
                            transactionalId,
                            reason: `no answer within ${timeout} ms`,
                            retriable: true
                          })
                        )
                    })
                  )
            ).pipe(
              // Interrupted or timed out mid-transaction: never reuse this producer.
              Effect.onInterrupt(() => reset),
              // After any failure the client's transaction state is not trustworthy (a fenced
              // producer keeps failing), and a new InitProducerId is cheap.
              Effect.catch((error) =>
                Effect.andThen(reset, Effect.fail(verdict(driver.protocol, transactionalId, error)))
              )
            )
            return receipts(request, result)
          })
        )
        .pipe(
          Effect.withSpan("kafka.transaction.commit", {
            attributes: { transactionalId, records: request.records.length }
          })
        )

    const clientFencing = driver.fencing
    const fencing: Fencing =
      "unsupported" in clientFencing
        ? { _tag: "Unsupported", reason: clientFencing.unsupported }
        : {
            _tag: "Group",
            committedOffset: (request) =>
              Effect.tryPromise({
                try: () => clientFencing.committedOffset(request),
                catch: (error) => verdict(driver.protocol, transactionalId, error)
              })
          }
    return TransactionalProducer.of({ transactionalId, fencing, commit })
  })
