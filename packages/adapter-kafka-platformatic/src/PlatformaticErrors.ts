/**
 * Maps @platformatic/kafka failures onto the library's typed errors, with the same verdicts as
 * the kafkajs adapter's `KafkaErrors`: an outage is `BrokerUnavailableError`, other transient
 * errors retriable, verdicts about the record, topic or permissions permanent.
 *
 * @platformatic/kafka reports broker answers as `ProtocolError`s (`apiId` is Kafka's error name,
 * e.g. `MESSAGE_TOO_LARGE`) wrapped in `ResponseError` / `MultipleErrors` (one per retry), and
 * client-side trouble as `NetworkError` / `TimeoutError` (`code` `PLT_KFK_NETWORK`).
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

interface PlatformaticLikeError {
  readonly name?: string
  readonly message?: string
  readonly code?: string
  readonly apiId?: string
  readonly canRetry?: boolean
  readonly errors?: ReadonlyArray<unknown>
  readonly cause?: unknown
}

const asError = (error: unknown): PlatformaticLikeError =>
  typeof error === "object" && error !== null ? (error as PlatformaticLikeError) : { message: String(error) }

/**
 * The leaves of an error tree: `MultipleErrors` holds one error per attempt or per partition,
 * `cause` the error a wrapper reports.
 *
 * @since 0.1.0
 * @category classification
 */
export const leaves = (error: unknown): ReadonlyArray<PlatformaticLikeError> => {
  const out: Array<PlatformaticLikeError> = []
  const walk = (e: unknown, depth: number) => {
    const current = asError(e)
    if (depth > 6) return void out.push(current)
    if (Array.isArray(current.errors) && current.errors.length > 0) {
      for (const inner of current.errors) walk(inner, depth + 1)
      return
    }
    // A client error with its own code (NetworkError, TimeoutError, …) is the leaf: its cause
    // is the socket's error it wraps.
    const ownCode = current.code?.startsWith("PLT_KFK_") && current.code !== "PLT_KFK_MULTIPLE"
    if (current.cause !== undefined && current.cause !== e && current.apiId === undefined && !ownCode) {
      walk(current.cause, depth + 1)
      return
    }
    out.push(current)
  }
  walk(error, 0)
  return out
}

/**
 * Kafka's error names found in the tree (`MESSAGE_TOO_LARGE`, `NOT_LEADER_OR_FOLLOWER`, …).
 *
 * @since 0.1.0
 * @category classification
 */
export const protocolTypes = (error: unknown): ReadonlySet<string> =>
  new Set(leaves(error).flatMap((leaf) => (leaf.apiId === undefined ? [] : [leaf.apiId])))

/**
 * Broker error codes that asking again can never fix.
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
 * Producer-state errors: the producer must be replaced (a fresh producer id), then sending again
 * is safe.
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
 * Broker answers that say the broker cannot take records right now: nothing about the record.
 *
 * @since 0.1.0
 * @category classification
 */
export const unavailableProtocolTypes: ReadonlySet<string> = new Set([
  "LEADER_NOT_AVAILABLE",
  "NOT_LEADER_OR_FOLLOWER",
  "REQUEST_TIMED_OUT",
  "BROKER_NOT_AVAILABLE",
  "NETWORK_EXCEPTION",
  "NOT_COORDINATOR",
  "COORDINATOR_NOT_AVAILABLE",
  "COORDINATOR_LOAD_IN_PROGRESS",
  "NOT_ENOUGH_REPLICAS",
  "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
  "KAFKA_STORAGE_ERROR",
  "FENCED_LEADER_EPOCH",
  "UNKNOWN_LEADER_EPOCH",
  "NOT_CONTROLLER"
])

/**
 * Broker verdicts on a record batch's size: "split and send again" for several records, "never"
 * for one.
 *
 * @since 0.1.0
 * @category classification
 */
export const recordSizeTypes: ReadonlySet<string> = new Set(["MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"])

/**
 * Client-side trouble with the connection: refused, closed, timed out, a reply that does not
 * match its request, or the client closed under a retry (a producer being replaced).
 */
const socketCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN"
])

const isNetworkLeaf = (leaf: PlatformaticLikeError) =>
  leaf.code === "PLT_KFK_NETWORK" ||
  (leaf.code !== undefined && socketCodes.has(leaf.code)) ||
  leaf.code === "PLT_KFK_TIMEOUT" ||
  leaf.code === "PLT_KFK_UNEXPECTED_CORRELATION_ID" ||
  leaf.code === "PLT_KFK_UNFINISHED_WRITE_BUFFER" ||
  leaf.name === "TimeoutError" ||
  (leaf.code === "PLT_KFK_USER" && (leaf.message ?? "").startsWith("Client closed while retrying"))

/**
 * The client's error when a metadata request names a topic the broker does not know.
 *
 * @since 0.1.0
 * @category classification
 */
export const isUnknownTopic = (error: unknown): boolean =>
  protocolTypes(error).has("UNKNOWN_TOPIC_OR_PARTITION") ||
  leaves(error).some((leaf) => leaf.code === "PLT_KFK_USER" && (leaf.message ?? "").startsWith("Unknown topic"))

/**
 * A one-line description: the error codes and Kafka error names found, and the messages.
 *
 * @since 0.1.0
 * @category classification
 */
export const describe = (error: unknown): string => {
  const outer = asError(error)
  const parts = leaves(error).map((leaf) => {
    const label = leaf.apiId ?? leaf.code ?? leaf.name ?? "Error"
    return `${label}: ${leaf.message ?? String(leaf)}`
  })
  const unique = [...new Set(parts)]
  const head = outer.message !== undefined && !unique.some((p) => p.endsWith(outer.message!)) ? `${outer.message} ` : ""
  return `${head}${unique.length > 0 ? `[${unique.join("; ")}]` : ""}`.trim() || String(error)
}

/**
 * Whether the error says the broker is unavailable (connection refused or lost, no answer in
 * time, no leader, not coordinator, …). It says nothing about the record: not an attempt.
 *
 * @since 0.1.0
 * @category classification
 */
export const isBrokerUnavailable = (error: unknown): boolean => {
  const all = leaves(error)
  const types = protocolTypes(error)
  if ([...types].some((t) => permanentProtocolTypes.has(t))) return false
  if ([...types].some((t) => unavailableProtocolTypes.has(t))) return true
  return all.length > 0 && all.every((leaf) => leaf.apiId === undefined && isNetworkLeaf(leaf))
}

/**
 * Whether trying again may succeed.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetriable = (error: unknown): boolean => {
  const types = protocolTypes(error)
  if ([...types].some((t) => permanentProtocolTypes.has(t))) return false
  if ([...types].some((t) => producerStateTypes.has(t))) return true
  const all = leaves(error)
  return all.some((leaf) => leaf.canRetry === true || isNetworkLeaf(leaf))
}

/**
 * Whether the broker refused a record batch for its size.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRecordSizeError = (error: unknown): boolean =>
  [...protocolTypes(error)].some((t) => recordSizeTypes.has(t))

/**
 * Whether the producer that saw this error must be replaced before the next send (an uncertain
 * failure: its sequence numbers may no longer match the broker's).
 *
 * @since 0.1.0
 * @category classification
 */
export const requiresProducerReset = (error: unknown): boolean =>
  ![...protocolTypes(error)].some((t) => permanentProtocolTypes.has(t))

/**
 * Whether a broker call other than a send may succeed when asked again (the broker is
 * unreachable or starting, a coordinator moved). "No such topic" is an answer, not a hiccup.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetriableBrokerCall = (error: unknown): boolean => {
  if (isUnknownTopic(error)) return false
  if ([...protocolTypes(error)].some((t) => producerStateTypes.has(t))) return false
  return isRetriable(error)
}

/**
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
 * Group-membership errors (the member was fenced by a rebalance) are retriable, as in
 * `KafkaErrors.toConsumerError`.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toConsumerError = (operation: string, error: unknown): ConsumerSourceError => {
  const types = protocolTypes(error)
  const fenced = [
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "NOT_COORDINATOR",
    "FENCED_INSTANCE_ID"
  ].some((t) => types.has(t))
  return new ConsumerSourceError({ operation, reason: describe(error), retriable: fenced || isRetriable(error) })
}
