/**
 * Every typed error of the library. Each carries the fields a person needs to act on it; the
 * store and publish errors also say what a retry means (`FailureKind`). The store error lives in
 * `StoreError.ts` and is re-exported here.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { FailureKind } from "./FailureKind.ts"
import { OutboxStatus } from "./Lifecycle.ts"

export { FailureKind } from "./FailureKind.ts"
export { BrokerSecurityError, BrokerUnreachableError, MissingTopicsError } from "./StartupErrors.ts"
export { OutboxStoreError, type OutboxStoreErrorFields, StoreError } from "./StoreError.ts"

/**
 * A draft (or other input) was rejected before anything was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class OutboxValidationError extends Schema.TaggedError<OutboxValidationError>()("OutboxValidationError", {
  field: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `invalid ${this.field}: ${this.reason}`
  }
}

/**
 * A transition that the lifecycle table forbids was requested: a bug in the caller, reported
 * instead of written.
 *
 * @since 0.1.0
 * @category errors
 */
export class IllegalTransitionError extends Schema.TaggedError<IllegalTransitionError>()("IllegalTransitionError", {
  from: Schema.Array(OutboxStatus),
  to: OutboxStatus
}) {
  override get message() {
    return `illegal outbox transition ${this.from.join("|")} -> ${this.to}`
  }
}

/**
 * No stored event has this id.
 *
 * @since 0.1.0
 * @category errors
 */
export class EventNotFoundError extends Schema.TaggedError<EventNotFoundError>()("EventNotFoundError", {
  id: Schema.String
}) {
  override get message() {
    return `no outbox event with id ${this.id}`
  }
}

/**
 * The broker may accept the record if asked again (timeout, leader change, broker down).
 * A timeout does not prove the record is absent from the broker.
 *
 * @since 0.1.0
 * @category errors
 */
export class RetriablePublishError extends Schema.TaggedError<RetriablePublishError>()("RetriablePublishError", {
  topic: Schema.String,
  reason: Schema.String
}) {
  /** Always `transient` (see {@link FailureKind}). */
  get kind(): "transient" {
    return "transient"
  }

  override get message() {
    return `publish to ${this.topic} failed (retriable): ${this.reason}`
  }
}

/**
 * The broker could not be reached or could not take records right now (connection refused or
 * closed, request timeout, no leader, not coordinator, broker shutting down). It says nothing
 * about the record itself, so the relay retries with backoff and jitter **without counting an
 * attempt**: an outage of any length does not spend the attempt budget. Like a
 * timeout, it does not prove the record is absent from the broker.
 *
 * @since 0.1.0
 * @category errors
 */
export class BrokerUnavailableError extends Schema.TaggedError<BrokerUnavailableError>()("BrokerUnavailableError", {
  topic: Schema.String,
  reason: Schema.String,
  /** Set when only this partition is out (its leader is away): the relay backs off that partition alone. */
  partition: Schema.optionalKey(Schema.Int)
}) {
  /** Always `unavailable` (see {@link FailureKind}). */
  get kind(): "unavailable" {
    return "unavailable"
  }

  override get message() {
    return `publish to ${this.topic} failed (broker unavailable): ${this.reason}`
  }
}

/**
 * The broker will never accept the record as it is (record too large, topic does not exist,
 * authorisation). Retrying is pointless.
 *
 * @since 0.1.0
 * @category errors
 */
export class PermanentPublishError extends Schema.TaggedError<PermanentPublishError>()("PermanentPublishError", {
  topic: Schema.String,
  reason: Schema.String
}) {
  /** Always `permanent` (see {@link FailureKind}). */
  get kind(): "permanent" {
    return "permanent"
  }

  override get message() {
    return `publish to ${this.topic} failed (permanent): ${this.reason}`
  }
}

/**
 * The record targets a partition the topic does not have.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownPartitionError extends Schema.TaggedError<UnknownPartitionError>()("UnknownPartitionError", {
  topic: Schema.String,
  partition: Schema.Int,
  partitionCount: Schema.optionalKey(Schema.Int)
}) {
  /**
   * `permanent`: the broker never accepts the record as addressed. The relay first re-reads the
   * topic's partition count (a topic grown since it last looked) before giving the row up.
   */
  get kind(): "permanent" {
    return "permanent"
  }

  override get message() {
    return (
      `topic ${this.topic} has no partition ${this.partition}` +
      (this.partitionCount === undefined ? "" : ` (it has ${this.partitionCount})`)
    )
  }
}

/**
 * A publish's failure. The broker adapter picks the class, and each class has one `kind`: what
 * the relay and the consumer do about it (docs/architecture.md, "Who decides a retry").
 *
 * @since 0.1.0
 * @category errors
 */
export type PublishError =
  | RetriablePublishError
  | BrokerUnavailableError
  | PermanentPublishError
  | UnknownPartitionError

/**
 * Looking for a record on the broker failed; the caller cannot tell whether it is there.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProbeError extends Schema.TaggedError<ProbeError>()("ProbeError", {
  topic: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `probing ${this.topic} failed: ${this.reason}`
  }
}

/**
 * A broker administration call failed. `kind` (when the adapter classified it) says whether asking
 * again can help; `security` that the brokers refused the connection itself.
 *
 * @since 0.1.0
 * @category errors
 */
export class BrokerAdminError extends Schema.TaggedError<BrokerAdminError>()("BrokerAdminError", {
  operation: Schema.String,
  topic: Schema.String,
  reason: Schema.String,
  kind: Schema.optionalKey(FailureKind),
  security: Schema.optionalKey(Schema.UndefinedOr(Schema.Literals(["authentication", "tls"])))
}) {
  override get message() {
    return `broker admin ${this.operation} on ${this.topic} failed: ${this.reason}`
  }
}

/**
 * Consuming or committing offsets failed.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConsumerSourceError extends Schema.TaggedError<ConsumerSourceError>()("ConsumerSourceError", {
  operation: Schema.String,
  reason: Schema.String,
  retriable: Schema.Boolean
}) {
  override get message() {
    return `consumer ${this.operation} failed: ${this.reason}`
  }
}

/**
 * A consumed payload does not decode with the consumer's schema. Permanent by default: the same
 * bytes will never decode, so the record goes to the dead-letter topic at once.
 *
 * @since 0.1.0
 * @category errors
 */
export class PayloadDecodeError extends Schema.TaggedError<PayloadDecodeError>()("PayloadDecodeError", {
  topic: Schema.String,
  partition: Schema.Int,
  offset: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `payload of ${this.topic}/${this.partition}@${this.offset} does not decode: ${this.reason}`
  }
}

/**
 * A consumer's handler died (threw, or failed with a defect). Classified like any other error —
 * transient by default, so it is retried and then dead-lettered — instead of killing the consumer.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandlerDefectError extends Schema.TaggedError<HandlerDefectError>()("HandlerDefectError", {
  reason: Schema.String,
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message() {
    return `handler died: ${this.reason}`
  }
}

/**
 * Parking more would exceed the store's bound (`maxRecords` per consumer group): release or
 * replay parked keys first. The consumer waits (retrying) rather than drop or reorder a record.
 *
 * @since 0.1.0
 * @category errors
 */
export class ParkedLimitError extends Schema.TaggedError<ParkedLimitError>()("ParkedLimitError", {
  consumer: Schema.String,
  limit: Schema.Number
}) {
  override get message() {
    return `consumer group ${this.consumer} already parks ${this.limit} records (the bound): release parked keys (effect-outbox parked release) before more can park`
  }
}

/**
 * The log failed (lost connection, slot gone, decoding error). `retriable` says whether taking
 * the lease again may help.
 *
 * @since 0.1.0
 * @category errors
 */
export class LogSourceError extends Schema.TaggedError<LogSourceError>()("LogSourceError", {
  operation: Schema.String,
  reason: Schema.String,
  retriable: Schema.Boolean
}) {
  override get message() {
    return `log source ${this.operation} failed: ${this.reason}`
  }
}

/**
 * Two consumer groups drive the outbox lifecycle of one topic: the second would skip every event
 * the first finished. Exactly one group per topic may keep `lifecycle` on. `registered` is set
 * when the other group is the one registered in the database (it may run in another process);
 * absent, both groups were declared in this runtime.
 *
 * The message is part of the printed error (`console.error`, `util.inspect`, JSON), not only a
 * getter, so the way out is visible wherever the error ends up.
 *
 * @since 0.1.0
 * @category errors
 */
export class LifecycleGroupConflictError extends Schema.TaggedError<LifecycleGroupConflictError>()(
  "LifecycleGroupConflictError",
  { topic: Schema.String, groups: Schema.Array(Schema.String), registered: Schema.optionalKey(Schema.String) }
) {
  override get message() {
    if (this.registered === undefined) {
      return (
        `consumer groups ${this.groups.join(", ")} all drive the outbox lifecycle of topic ${this.topic}; ` +
        `keep lifecycle on for one of them and declare the others with lifecycle: false`
      )
    }
    const group = this.groups.find((g) => g !== this.registered) ?? this.groups[0]
    return (
      `consumer group ${group} cannot drive the outbox lifecycle of topic ${this.topic}: group ` +
      `${this.registered} is registered as its lifecycle group (and may run in another process); a second ` +
      `one would skip every event the first finished. Run ${group} as a plain inbox group with ` +
      `lifecycle: false (every group but one fans out this way), or hand the role over when ${this.registered} ` +
      `is retired: effect-outbox lifecycle release --topic ${this.topic} --group ${this.registered} --execute`
    )
  }
  override toJSON() {
    return { ...(super.toJSON() as object), message: this.message }
  }
}

/**
 * The transaction was aborted: none of its records is visible and its offsets were not
 * committed. `retriable: false` when retrying cannot help (fenced by a newer producer with the
 * same `transactionalId`, authorisation, a record the broker refuses).
 *
 * @since 0.1.0
 * @category errors
 */
export class TransactionAbortedError extends Schema.TaggedError<TransactionAbortedError>()("TransactionAbortedError", {
  transactionalId: Schema.String,
  reason: Schema.String,
  retriable: Schema.Boolean,
  /**
   * The group coordinator refused the offsets: the member left the generation its input was
   * fetched under (a rebalance). Running the same transaction again cannot succeed; the input
   * comes again under the new generation, to whichever member owns it now.
   */
  groupFenced: Schema.optional(Schema.Boolean)
}) {
  override get message() {
    return (
      `Kafka transaction of ${this.transactionalId} aborted: ${this.reason}` +
      (this.retriable
        ? ""
        : " (not retriable: another producer with this transactionalId fenced it, or the broker refuses a record)")
    )
  }
}

/**
 * The exactly-once pipeline cannot fence a member that lost its partitions on this client or
 * consumer source: it would commit offsets without the group's generation and member id, and a
 * revoked member could commit beside the partition's new owner (duplicate outputs). The pipeline
 * refuses to start rather than run unfenced.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransactionalFencingError extends Schema.TaggedError<TransactionalFencingError>()(
  "TransactionalFencingError",
  {
    transactionalId: Schema.String,
    reason: Schema.String
  }
) {
  override get message() {
    return `the transactional pipeline of ${this.transactionalId} cannot be fenced against rebalances: ${this.reason}`
  }
}

/**
 * The dead-letter topic refused the record (or kept failing): the consumer stops rather than
 * lose the record. Create the topic, or fix the broker, and restart; nothing was committed past it.
 *
 * @since 0.1.0
 * @category errors
 */
export class DeadLetterPublishError extends Schema.TaggedError<DeadLetterPublishError>()("DeadLetterPublishError", {
  deadLetterTopic: Schema.String,
  topic: Schema.String,
  partition: Schema.Int,
  offset: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return (
      `could not dead-letter ${this.topic}/${this.partition}@${this.offset} to ${this.deadLetterTopic}: ${this.reason}` +
      ` (does the topic exist? offsets stay uncommitted, so the record is redelivered after a restart)`
    )
  }
}

/**
 * An entry of the log that is not an event of this library (wrong version, bad metadata).
 *
 * @since 0.1.0
 * @category errors
 */
export class LogRecordError extends Schema.TaggedError<LogRecordError>()("LogRecordError", {
  reason: Schema.String
}) {
  override get message() {
    return `log record unreadable: ${this.reason}`
  }
}
