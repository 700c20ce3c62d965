/**
 * How kafkajs names its failures, read into the Kafka layer's one classification
 * (`@effect-outbox/kafka/KafkaProtocol`): the broker's error type of the innermost error, and
 * whether kafkajs saw an outage of its own. One place decides what is retriable, so the
 * publisher, the admin, the probe and the consumer source agree.
 *
 * @since 0.1.0
 */
import * as KafkaProtocol from "@effect-outbox/kafka/KafkaProtocol"

interface KafkaLikeError {
  readonly name?: string
  readonly message?: string
  readonly type?: string
  readonly retriable?: boolean
  readonly cause?: unknown
}

const asKafkaError = KafkaProtocol.fieldsOf<KafkaLikeError>

/**
 * kafkajs errors of the client side of an outage: no connection, no answer in time, no broker
 * or metadata to send with.
 *
 * @since 0.1.0
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

const transientNames: ReadonlySet<string> = new Set([...unavailableNames, "KafkaJSStaleTopicMetadataAssignment"])

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

const isAuthentication = (node: object) =>
  (node as KafkaLikeError).name === "KafkaJSSASLAuthenticationError" ||
  (node as KafkaLikeError).type === KafkaProtocol.SASL_AUTHENTICATION_FAILED

/**
 * What the Kafka layer reads from a kafkajs error: the broker's error type of its root cause, and
 * whether kafkajs itself saw an outage or calls the error retriable.
 *
 * @since 0.1.0
 * @category classification
 */
export const errorNames = (error: unknown): KafkaProtocol.ErrorNames => {
  const root = rootCause(error)
  const client = root.type === undefined && root.name !== undefined
  return {
    protocol: new Set(root.type === undefined ? [] : [root.type]),
    clientOutage: client && unavailableNames.has(root.name!),
    retriable: root.retriable === true || (client && transientNames.has(root.name!)),
    // A certificate verdict travels as the `code` of a KafkaJSConnectionError.
    security: KafkaProtocol.findSecurity(error, isAuthentication)
  }
}

/**
 * The kafkajs classification (see `KafkaProtocol.Protocol`).
 *
 * @since 0.1.0
 * @category classification
 */
export const protocol: KafkaProtocol.Protocol = KafkaProtocol.make(errorNames, describe)

/**
 * @since 0.1.0
 * @category classification
 */
export const {
  isRetriable,
  isBrokerUnavailable,
  isRecordSizeError,
  requiresProducerReset,
  isRetriableBrokerCall,
  toPublishError,
  toAdminError,
  toProbeError,
  toConsumerError
} = protocol
