/**
 * Maps kafkajs failures onto the library's typed errors. One place decides what is retriable,
 * so the publisher, the admin, the probe and the consumer source agree.
 *
 * @since 0.1.0
 */
import {
  BrokerAdminError,
  BrokerUnavailableError,
  ConsumerSourceError,
  PermanentPublishError,
  ProbeError,
  type PublishError,
  RetriablePublishError
} from "@effect-outbox/core/Errors"

interface KafkaLikeError {
  readonly name?: string
  readonly message?: string
  readonly type?: string
  readonly retriable?: boolean
  readonly cause?: unknown
}

const asKafkaError = (error: unknown): KafkaLikeError =>
  typeof error === "object" && error !== null ? (error as KafkaLikeError) : { message: String(error) }

/**
 * Broker error codes that asking again can never fix: the record, the topic name or the
 * permissions are wrong.
 *
 * @since 0.1.0
 * @category classification
 */
export const permanentProtocolTypes: ReadonlySet<string> = new Set([
  "MESSAGE_TOO_LARGE",
  "RECORD_LIST_TOO_LARGE",
  "INVALID_TOPIC_EXCEPTION",
  "TOPIC_AUTHORIZATION_FAILED",
  "CLUSTER_AUTHORIZATION_FAILED",
  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
  "INVALID_RECORD",
  "CORRUPT_MESSAGE",
  "UNSUPPORTED_FOR_MESSAGE_FORMAT",
  "UNSUPPORTED_COMPRESSION_TYPE",
  "INVALID_REQUIRED_ACKS",
  "POLICY_VIOLATION",
  "INVALID_CONFIG",
  "INVALID_REPLICATION_FACTOR",
  "SASL_AUTHENTICATION_FAILED"
])

/**
 * Producer-state errors: the producer id, epoch or sequence no longer match the broker's. The
 * producer must be replaced (a fresh producer id), after which sending again is safe.
 *
 * @since 0.1.0
 * @category classification
 */
export const producerStateTypes: ReadonlySet<string> = new Set([
  "OUT_OF_ORDER_SEQUENCE_NUMBER",
  "DUPLICATE_SEQUENCE_NUMBER",
  "INVALID_PRODUCER_EPOCH",
  "UNKNOWN_PRODUCER_ID",
  "INVALID_PRODUCER_ID_MAPPING",
  "PRODUCER_FENCED"
])

/**
 * Broker answers that say the broker cannot take records right now (no leader, coordinator
 * moving or loading, too few in-sync replicas, a network or storage failure on its side):
 * nothing about the record. Kafka spells some of them two ways (kafkajs keeps the old names).
 *
 * @since 0.2.0
 * @category classification
 */
export const unavailableProtocolTypes: ReadonlySet<string> = new Set([
  "LEADER_NOT_AVAILABLE",
  "NOT_LEADER_FOR_PARTITION",
  "NOT_LEADER_OR_FOLLOWER",
  "REQUEST_TIMED_OUT",
  "BROKER_NOT_AVAILABLE",
  "NETWORK_EXCEPTION",
  "NOT_COORDINATOR",
  "NOT_COORDINATOR_FOR_GROUP",
  "COORDINATOR_NOT_AVAILABLE",
  "GROUP_COORDINATOR_NOT_AVAILABLE",
  "COORDINATOR_LOAD_IN_PROGRESS",
  "GROUP_LOAD_IN_PROGRESS",
  "NOT_ENOUGH_REPLICAS",
  "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
  "KAFKA_STORAGE_ERROR",
  "FENCED_LEADER_EPOCH",
  "UNKNOWN_LEADER_EPOCH",
  "NOT_CONTROLLER"
])

/**
 * kafkajs errors of the client side of an outage: no connection, no answer in time, no broker
 * or metadata to send with.
 *
 * @since 0.2.0
 * @category classification
 */
export const unavailableNames: ReadonlySet<string> = new Set([
  "KafkaJSConnectionError",
  "KafkaJSConnectionClosedError",
  "KafkaJSRequestTimeoutError",
  "KafkaJSTimeout",
  "KafkaJSLockTimeout",
  "KafkaJSNoBrokerAvailableError",
  "KafkaJSBrokerNotFound",
  "KafkaJSMetadataNotLoaded",
  "KafkaJSTopicMetadataNotLoaded",
  "KafkaJSGroupCoordinatorNotFound"
])

/**
 * Broker verdicts on a record batch's size. On a batch of several records they mean "split and
 * send again"; on one record alone, that the record can never be published to this topic.
 *
 * @since 0.2.0
 * @category classification
 */
export const recordSizeTypes: ReadonlySet<string> = new Set(["MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"])

const transientNames: ReadonlySet<string> = new Set([
  "KafkaJSConnectionError",
  "KafkaJSConnectionClosedError",
  "KafkaJSRequestTimeoutError",
  "KafkaJSTimeout",
  "KafkaJSLockTimeout",
  "KafkaJSNoBrokerAvailableError",
  "KafkaJSBrokerNotFound",
  "KafkaJSMetadataNotLoaded",
  "KafkaJSTopicMetadataNotLoaded",
  "KafkaJSStaleTopicMetadataAssignment",
  "KafkaJSGroupCoordinatorNotFound"
])

/**
 * kafkajs 2.2.4's `admin.fetchTopicMetadata` (and `cluster.metadata` under it) answers an outage
 * that begins while its cached metadata is still fresh with a `TypeError`: every broker's metadata
 * request failed, `brokerPool.withBroker` swallowed the failures and returned `null`, and the
 * caller read `null.topicMetadata`. It means no broker answered, so it is read as
 * `KafkaJSBrokerNotFound` (unavailable, retried without spending an attempt), not as a permanent
 * failure of the records it was sent for.
 */
const nullMetadata = (error: KafkaLikeError): KafkaLikeError | undefined =>
  error.name === "TypeError" && /of null \(reading 'topicMetadata'\)/.test(error.message ?? "")
    ? {
        name: "KafkaJSBrokerNotFound",
        message: `no broker answered a metadata request (kafkajs: ${error.message})`,
        retriable: true
      }
    : undefined

/**
 * The innermost kafkajs error: `KafkaJSNumberOfRetriesExceeded` and friends wrap the one that
 * says what actually went wrong.
 *
 * @since 0.1.0
 * @category classification
 */
export const rootCause = (error: unknown): KafkaLikeError => {
  let current = asKafkaError(error)
  for (let depth = 0; depth < 5; depth++) {
    if (
      (current.name === "KafkaJSNumberOfRetriesExceeded" || current.name === "KafkaJSNonRetriableError") &&
      current.cause !== undefined &&
      current.cause !== current
    ) {
      current = asKafkaError(current.cause)
    } else break
  }
  return nullMetadata(current) ?? current
}

/**
 * A one-line description a person can act on: the kafkajs error name, the broker's error type
 * when there is one, and the message.
 *
 * @since 0.1.0
 * @category classification
 */
export const describe = (error: unknown): string => {
  const outer = asKafkaError(error)
  const root = rootCause(error)
  const parts = [root.name ?? "Error"]
  if (root.type) parts.push(`(${root.type})`)
  parts.push(`: ${root.message ?? String(error)}`)
  if (root !== outer && outer.name) parts.push(` [via ${outer.name}]`)
  return parts.join("")
}

/**
 * Whether trying again may succeed: connection problems, timeouts, leadership moves and
 * producer-state errors are; broker verdicts about the record, the topic or permissions are not.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetriable = (error: unknown): boolean => {
  const root = rootCause(error)
  if (root.type !== undefined) {
    if (permanentProtocolTypes.has(root.type)) return false
    if (producerStateTypes.has(root.type)) return true
    return root.retriable === true
  }
  if (root.name !== undefined && transientNames.has(root.name)) return true
  return root.retriable === true
}

/**
 * Whether the error says the broker is unavailable (an outage: connection refused or closed,
 * request timeout, no leader, not coordinator, …), also when `KafkaJSNumberOfRetriesExceeded`
 * wraps it. Such an error says nothing about the record, so it does not count as an attempt.
 *
 * @since 0.2.0
 * @category classification
 */
export const isBrokerUnavailable = (error: unknown): boolean => {
  const root = rootCause(error)
  if (root.type !== undefined) return unavailableProtocolTypes.has(root.type)
  return root.name !== undefined && unavailableNames.has(root.name)
}

/**
 * Whether the broker refused a record batch for its size (see `recordSizeTypes`).
 *
 * @since 0.2.0
 * @category classification
 */
export const isRecordSizeError = (error: unknown): boolean => {
  const type = rootCause(error).type
  return type !== undefined && recordSizeTypes.has(type)
}

/**
 * Whether the producer that saw this error must be replaced before the next send. After an
 * uncertain failure (timeout, lost connection) kafkajs rolls its sequence numbers back; reusing
 * them for different records could make the broker discard those records as duplicates of a
 * batch that did land. A fresh producer id makes that impossible.
 *
 * @since 0.1.0
 * @category classification
 */
export const requiresProducerReset = (error: unknown): boolean => {
  const root = rootCause(error)
  if (root.type !== undefined && permanentProtocolTypes.has(root.type)) return false
  return true
}

/**
 * An outage becomes `BrokerUnavailableError` (not an attempt), other transient errors
 * `RetriablePublishError`, verdicts about the record or topic `PermanentPublishError`.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toPublishError = (topic: string, error: unknown): PublishError =>
  isBrokerUnavailable(error)
    ? new BrokerUnavailableError({ topic, reason: describe(error) })
    : isRetriable(error)
      ? new RetriablePublishError({ topic, reason: describe(error) })
      : new PermanentPublishError({ topic, reason: describe(error) })

/**
 * @since 0.1.0
 * @category mapping
 */
export const toAdminError = (operation: string, topic: string, error: unknown): BrokerAdminError =>
  new BrokerAdminError({ operation, topic, reason: describe(error) })

/**
 * @since 0.1.0
 * @category mapping
 */
export const toProbeError = (topic: string, error: unknown): ProbeError =>
  new ProbeError({ topic, reason: describe(error) })

/**
 * Group-membership errors on commit (the member was fenced by a rebalance) are retriable: once
 * the member rejoined, a commit for a partition it still owns succeeds, and one for a partition
 * it lost is dropped by the source.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toConsumerError = (operation: string, error: unknown): ConsumerSourceError => {
  const root = rootCause(error)
  const fenced =
    root.type === "REBALANCE_IN_PROGRESS" ||
    root.type === "ILLEGAL_GENERATION" ||
    root.type === "UNKNOWN_MEMBER_ID" ||
    root.type === "NOT_COORDINATOR_FOR_GROUP" ||
    root.type === "FENCED_INSTANCE_ID"
  return new ConsumerSourceError({ operation, reason: describe(error), retriable: fenced || isRetriable(error) })
}

/**
 * Whether a broker call other than a send (metadata, offsets, group lookups, topic creation, a
 * consumer starting) may succeed when asked again: the broker is unreachable or still starting,
 * a group coordinator is loading or moved, a leader is being elected. A freshly formatted broker
 * answers all of these for its first seconds. "No such topic" is an answer to these calls, not a
 * hiccup, and producer-state errors do not concern them.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetriableBrokerCall = (error: unknown): boolean => {
  const root = rootCause(error)
  if (root.type === "UNKNOWN_TOPIC_OR_PARTITION") return false
  if (root.type !== undefined && producerStateTypes.has(root.type)) return false
  return isRetriable(error)
}
