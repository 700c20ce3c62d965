/**
 * `TransactionalProducer` on @platformatic/kafka: records and a consumer group's offsets
 * committed in one Kafka transaction. The client speaks the whole transaction protocol:
 * `FindCoordinator` (transaction key), `InitProducerId` with the `transactionalId`,
 * `AddPartitionsToTxn` (on each `send` of a transaction), `AddOffsetsToTxn` (`addConsumer`),
 * `TxnOffsetCommit` (`addOffset`) and `EndTxn` (`commit` / `abort`).
 *
 * Offsets are committed without a group generation (`generationId` -1, no member id), as kafkajs'
 * `sendOffsets` does: the broker accepts that in a transaction whatever the group's state. The
 * client's `addOffset` wants a consumed `Message` carrying its consumer's group metadata; the
 * port hands us only `{ topic, partition, offset }`, so we build that message (the group
 * coordinator comes from the admin's `findCoordinator`).
 *
 * Pair it with `PlatformaticConsumerSource`, which reads `read_committed`.
 *
 * @since 0.1.0
 */
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import {
  TransactionAbortedError,
  TransactionalProducer,
  type TransactionRequest
} from "@effect-outbox/core/TransactionalProducer"
import { ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Semaphore from "effect/Semaphore"
import * as Transaction from "./internal/transaction.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { describe, isRetriable, isUnknownTopic, protocolTypes } from "./PlatformaticErrors.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PlatformaticTransactionalProducerOptions {
  /** Stable per pipeline instance: a restarted instance with the same id fences the old one. */
  readonly transactionalId: string
  /**
   * The client sends its request timeout as the transaction timeout of `InitProducerId`, so this
   * one setting is both (default 10000; the broker aborts a transaction left open longer).
   */
  readonly transactionTimeoutMillis?: number | undefined
  /** Upper bound on one `commit`, retries included (default 30000). */
  readonly commitTimeoutMillis?: number | undefined
}

/** Broker answers after which this producer may never commit again: retrying cannot help. */
const fencedTypes: ReadonlySet<string> = new Set([
  "PRODUCER_FENCED",
  "INVALID_PRODUCER_EPOCH",
  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
  "TRANSACTION_COORDINATOR_FENCED",
  "GROUP_AUTHORIZATION_FAILED"
])

/** Why a transaction failed, and whether running it again on a fresh producer may succeed. */
const verdict = (transactionalId: string, error: unknown): TransactionAbortedError => {
  const aborted = (reason: string, retriable: boolean) =>
    new TransactionAbortedError({ transactionalId, reason, retriable })
  if (error instanceof TransactionAbortedError) return error
  if (error instanceof Transaction.Refused) return aborted(error.reason, false)
  if (isUnknownTopic(error)) return aborted(`a topic does not exist: ${describe(error)}`, false)
  const fenced = [...protocolTypes(error)].some((t) => fencedTypes.has(t))
  return aborted(describe(error), !fenced && isRetriable(error))
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticTransactionalProducerOptions) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    const { transactionalId } = options
    const commitTimeout = options.commitTimeoutMillis ?? 30_000
    const lock = yield* Semaphore.make(1)
    let producer: Transaction.TxProducer | undefined

    const acquire = (): Transaction.TxProducer => {
      producer ??= new Producer<Buffer | undefined, Buffer, string, string>({
        ...client.baseOptions,
        timeout: options.transactionTimeoutMillis ?? 10_000,
        transactionalId,
        idempotent: true,
        acks: ProduceAcks.ALL,
        autocreateTopics: false,
        repeatOnStaleMetadata: false,
        // Few retries: a failing transaction is aborted and retried whole by the caller.
        retries: 3,
        serializers: { headerKey: stringSerializer, headerValue: stringSerializer }
      })
      return producer
    }
    // The next transaction starts on a fresh producer, whose InitProducerId bumps the epoch and
    // aborts whatever this one left open. Forced: a producer stuck on a dead broker never closes.
    const reset = Effect.suspend(() => {
      const old = producer
      producer = undefined
      return old === undefined ? Effect.void : Effect.promise(() => old.close(true).catch(() => undefined))
    })
    yield* Effect.addFinalizer(() => lock.withPermits(1)(reset))

    const commit = (
      request: TransactionRequest
    ): Effect.Effect<ReadonlyArray<PublishReceipt>, TransactionAbortedError> =>
      lock
        .withPermits(1)(
          Effect.gen(function* () {
            if (request.records.length === 0 && request.offsets.length === 0) return []
            const p = acquire()
            const result = yield* Effect.tryPromise({
              try: () => Transaction.run(p, client.admin, request),
              catch: (error) => error
            }).pipe(
              Effect.timeoutOrElse({
                duration: commitTimeout,
                orElse: () =>
                  Effect.fail(
                    new TransactionAbortedError({
                      transactionalId,
                      reason: `no answer within ${commitTimeout} ms`,
                      retriable: true
                    })
                  )
              }),
              // Interrupted or timed out mid-transaction: never reuse this producer.
              Effect.onInterrupt(() => reset),
              // After any failure the client's transaction state is not trustworthy (a fenced
              // producer keeps failing): the next transaction gets a fresh producer.
              Effect.catch((error) => Effect.andThen(reset, Effect.fail(verdict(transactionalId, error))))
            )
            return Transaction.receipts(request, result)
          })
        )
        .pipe(
          Effect.withSpan("kafka.transaction.commit", {
            attributes: { transactionalId, records: request.records.length }
          })
        )

    return TransactionalProducer.of({ transactionalId, commit })
  })

/**
 * `TransactionalProducer` over the shared `PlatformaticClient`. Separate from
 * `PlatformaticKafkaOutbox`: a transactional id belongs to one pipeline instance.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, PlatformaticClient> => Layer.effect(TransactionalProducer)(make(options))
