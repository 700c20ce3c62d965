/**
 * Every typed error of the library. Each carries the fields a person needs to act on it.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { OutboxStatus } from "./Lifecycle.ts"

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
 * A storage operation failed (database error, lost connection, …). `retriable` says whether
 * trying again may help.
 *
 * @since 0.1.0
 * @category errors
 */
export class OutboxStoreError extends Schema.TaggedError<OutboxStoreError>()("OutboxStoreError", {
  operation: Schema.String,
  reason: Schema.String,
  retriable: Schema.Boolean,
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message() {
    return `outbox store ${this.operation} failed: ${this.reason}`
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
 * A timeout does not prove the record is absent from the broker (R3.2).
 *
 * @since 0.1.0
 * @category errors
 */
export class RetriablePublishError extends Schema.TaggedError<RetriablePublishError>()("RetriablePublishError", {
  topic: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `publish to ${this.topic} failed (retriable): ${this.reason}`
  }
}

/**
 * The broker could not be reached or could not take records right now (connection refused or
 * closed, request timeout, no leader, not coordinator, broker shutting down). It says nothing
 * about the record itself, so the relay retries with backoff and jitter **without counting an
 * attempt**: an outage of any length does not spend the attempt budget (issue #12, H1). Like a
 * timeout, it does not prove the record is absent from the broker.
 *
 * @since 0.2.0
 * @category errors
 */
export class BrokerUnavailableError extends Schema.TaggedError<BrokerUnavailableError>()("BrokerUnavailableError", {
  topic: Schema.String,
  reason: Schema.String
}) {
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
  override get message() {
    return `publish to ${this.topic} failed (permanent): ${this.reason}`
  }
}

/**
 * The record targets a partition the topic does not have (R3.3).
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownPartitionError extends Schema.TaggedError<UnknownPartitionError>()("UnknownPartitionError", {
  topic: Schema.String,
  partition: Schema.Int,
  partitionCount: Schema.optionalKey(Schema.Int)
}) {
  override get message() {
    return (
      `topic ${this.topic} has no partition ${this.partition}` +
      (this.partitionCount === undefined ? "" : ` (it has ${this.partitionCount})`)
    )
  }
}

/**
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
 * A broker administration call failed.
 *
 * @since 0.1.0
 * @category errors
 */
export class BrokerAdminError extends Schema.TaggedError<BrokerAdminError>()("BrokerAdminError", {
  operation: Schema.String,
  topic: Schema.String,
  reason: Schema.String
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
