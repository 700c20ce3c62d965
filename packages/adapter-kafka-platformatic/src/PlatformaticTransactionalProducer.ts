/**
 * `TransactionalProducer` on @platformatic/kafka: records and a consumer group's offsets
 * committed in one Kafka transaction. The client speaks the whole transaction protocol:
 * `FindCoordinator` (transaction key), `InitProducerId` with the `transactionalId`,
 * `AddPartitionsToTxn` (on each `send` of a transaction), `AddOffsetsToTxn` (`addConsumer`),
 * `TxnOffsetCommit` (`addOffset`) and `EndTxn` (`commit` / `abort`).
 *
 * Offsets are committed with the group generation and member id the input batch was fetched
 * under (`TxnOffsetCommit` v3 and later): the group coordinator refuses them once the member left
 * that generation, so a member that lost a partition in a rebalance cannot commit beside its new
 * owner. The client's `addOffset` wants a consumed `Message` carrying its consumer's group
 * metadata; the port hands us `{ topic, partition, offset }` and the request's group, so we
 * build that message (the group coordinator comes from the admin's `findCoordinator`). A new
 * owner reads its starting offset stable (`requireStable`), after the old owner's last
 * transaction.
 *
 * Pair it with `PlatformaticConsumerSource`, which reads `read_committed`.
 *
 * @since 0.1.0
 */
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Transactions from "@effect-outbox/kafka/Transactions"
import { ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Transaction from "./internal/transaction.ts"
import { PlatformaticClient } from "./PlatformaticClient.ts"
import { protocol } from "./PlatformaticErrors.ts"

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

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PlatformaticTransactionalProducerOptions) =>
  Effect.gen(function* () {
    const client = yield* PlatformaticClient
    return yield* Transactions.make(
      {
        protocol,
        create: (): Transaction.TxProducer =>
          new Producer<Buffer | undefined, Buffer, string, string>({
            ...client.baseOptions,
            timeout: options.transactionTimeoutMillis ?? 10_000,
            transactionalId: options.transactionalId,
            idempotent: true,
            acks: ProduceAcks.ALL,
            autocreateTopics: false,
            repeatOnStaleMetadata: false,
            // Few retries: a failing transaction is aborted and retried whole by the caller.
            retries: 3,
            serializers: { headerKey: stringSerializer, headerValue: stringSerializer }
          }),
        // Forced: a producer stuck on a dead broker never closes.
        close: (p) => p.close(true),
        run: (p, request) => Transaction.run(p, client.admin, request),
        fencing: { committedOffset: (request) => Transaction.committedOffset(client.admin, request) }
      },
      { transactionalId: options.transactionalId, commitTimeoutMillis: options.commitTimeoutMillis ?? 30_000 }
    )
  })

/**
 * `TransactionalProducer` over the shared `PlatformaticClient`. Separate from
 * `PlatformaticOutbox`: a transactional id belongs to one pipeline instance.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PlatformaticTransactionalProducerOptions
): Layer.Layer<TransactionalProducer, never, PlatformaticClient> => Layer.effect(TransactionalProducer)(make(options))
