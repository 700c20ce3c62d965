/**
 * What Kafka's error names mean for the library, for every client. A driver extracts the names
 * from its client's error ({@link ErrorNames}); {@link verdict} decides whether the failure is an
 * outage (`unavailable`: not an attempt), worth another try (`transient`) or final (`permanent`),
 * and {@link make} turns that into the predicates and typed errors the publisher, the admin, the
 * probe and the consumer source share.
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

/**
 * Broker verdicts on a record batch's size. On a batch of several records they mean "split and
 * send again"; on one record alone, that the record can never be published to this topic.
 *
 * @since 0.1.0
 * @category tables
 */
export const recordSizeNames: ReadonlySet<string> = new Set(["MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"])

/**
 * The broker's answer to credentials it does not accept.
 *
 * @since 0.1.0
 * @category tables
 */
export const SASL_AUTHENTICATION_FAILED = "SASL_AUTHENTICATION_FAILED"

/**
 * Broker error names that asking again can never fix: the record, the topic name or the
 * permissions are wrong.
 *
 * @since 0.1.0
 * @category tables
 */
export const permanentNames: ReadonlySet<string> = new Set([
  ...recordSizeNames,
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
  SASL_AUTHENTICATION_FAILED,
  "GROUP_AUTHORIZATION_FAILED"
])

// A newer producer of the same id took over (its epoch is higher).
const epochFencedNames = ["PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"]

/**
 * Producer-state errors: the producer id, epoch or sequence no longer match the broker's. The
 * producer must be replaced (a fresh producer id), after which sending again is safe.
 *
 * @since 0.1.0
 * @category tables
 */
export const producerStateNames: ReadonlySet<string> = new Set([
  "OUT_OF_ORDER_SEQUENCE_NUMBER",
  "DUPLICATE_SEQUENCE_NUMBER",
  "UNKNOWN_PRODUCER_ID",
  "INVALID_PRODUCER_ID_MAPPING",
  ...epochFencedNames
])

const notCoordinatorNames = ["NOT_COORDINATOR", "NOT_COORDINATOR_FOR_GROUP"]

/**
 * Group coordinator moving or loading (a fresh broker, a coordinator failover): the same group
 * call succeeds a moment later. Kafka spells them two ways; kafkajs keeps the old names.
 *
 * @since 0.1.0
 * @category tables
 */
export const coordinatorMovingNames: ReadonlySet<string> = new Set([
  ...notCoordinatorNames,
  "COORDINATOR_NOT_AVAILABLE",
  "GROUP_COORDINATOR_NOT_AVAILABLE",
  "COORDINATOR_LOAD_IN_PROGRESS",
  "GROUP_LOAD_IN_PROGRESS"
])

/**
 * A partition without a leader yet (a new topic, or a leader election under way).
 *
 * @since 0.1.0
 * @category tables
 */
export const LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"

/**
 * Broker answers that say the broker cannot take records right now (no leader, coordinator
 * moving or loading, too few in-sync replicas, a network or storage failure on its side):
 * nothing about the record.
 *
 * @since 0.1.0
 * @category tables
 */
export const unavailableNames: ReadonlySet<string> = new Set([
  LEADER_NOT_AVAILABLE,
  "NOT_LEADER_FOR_PARTITION",
  "NOT_LEADER_OR_FOLLOWER",
  "REQUEST_TIMED_OUT",
  "BROKER_NOT_AVAILABLE",
  "NETWORK_EXCEPTION",
  ...coordinatorMovingNames,
  "NOT_ENOUGH_REPLICAS",
  "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
  "KAFKA_STORAGE_ERROR",
  "FENCED_LEADER_EPOCH",
  "UNKNOWN_LEADER_EPOCH",
  "NOT_CONTROLLER"
])

/**
 * A member's group generation that is no longer the group's.
 *
 * @since 0.1.0
 * @category tables
 */
export const ILLEGAL_GENERATION = "ILLEGAL_GENERATION"

/**
 * A heartbeat or fetch answering these says the group is rebalancing: the member must rejoin.
 *
 * @since 0.1.0
 * @category tables
 */
export const rebalanceNames: ReadonlySet<string> = new Set([
  "REBALANCE_IN_PROGRESS",
  ILLEGAL_GENERATION,
  ...notCoordinatorNames
])

/**
 * The group coordinator's answers to a member that left the generation: the member rejoins, and
 * its stream starts again at the group's committed offsets.
 *
 * @since 0.1.0
 * @category tables
 */
export const groupFencedNames: ReadonlySet<string> = new Set([
  ILLEGAL_GENERATION,
  "UNKNOWN_MEMBER_ID",
  "FENCED_INSTANCE_ID"
])

/**
 * Group-membership errors: the member was fenced by a rebalance (or its coordinator moved). A
 * commit for a partition it still owns succeeds once it rejoined.
 *
 * @since 0.1.0
 * @category tables
 */
export const fencedNames: ReadonlySet<string> = new Set([...rebalanceNames, ...groupFencedNames])

/**
 * Broker answers after which a transactional producer may never commit again: running the
 * transaction again cannot help (the permanent names, authorisation among them, cannot either).
 *
 * @since 0.1.0
 * @category tables
 */
export const transactionFencedNames: ReadonlySet<string> = new Set([
  ...epochFencedNames,
  "TRANSACTION_COORDINATOR_FENCED"
])

/**
 * The broker's answer to a call naming a topic it does not know.
 *
 * @since 0.1.0
 * @category tables
 */
export const UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PARTITION"

/**
 * Node's socket error codes of a connection that could not be made or was lost: refused, reset,
 * timed out, a broken pipe, an unreachable host or network, a name that does not resolve (yet).
 *
 * @since 0.1.0
 * @category tables
 */
export const socketCodes: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN"
])

/**
 * Node's TLS verdicts on the broker's certificate chain, and the handshake alerts a broker sends
 * back (a client certificate it requires or refuses): the CA, certificate or host name settings
 * are wrong, and connecting again gives the same answer.
 *
 * @since 0.1.0
 * @category tables
 */
export const tlsCodes: ReadonlySet<string> = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "ERR_TLS_CERT_ALTNAME_INVALID"
])

/**
 * Whether a Node error code says the TLS handshake itself was refused: a certificate verdict
 * ({@link tlsCodes}) or an OpenSSL alert (`ERR_SSL_…`, such as a client certificate the broker
 * requires but was not sent).
 *
 * @since 0.1.0
 * @category tables
 */
export const isTlsCode = (code: string): boolean => tlsCodes.has(code) || code.startsWith("ERR_SSL_")

/**
 * A refused connection: the brokers do not accept these credentials (`authentication`) or the
 * TLS handshake failed on a certificate (`tls`).
 *
 * @since 0.1.0
 * @category models
 */
export type Security = "authentication" | "tls"

/**
 * The security failure anywhere in an error tree (`errors` arrays, `cause` chains): a TLS code on
 * any node, or a node `isAuthentication` recognises. Clients wrap both in their connection
 * errors, which otherwise read as an outage.
 *
 * @since 0.1.0
 * @category verdicts
 */
export const findSecurity = (error: unknown, isAuthentication: (node: object) => boolean): Security | undefined => {
  const seen = new Set<unknown>()
  const walk = (node: unknown, depth: number): Security | undefined => {
    if (typeof node !== "object" || node === null || seen.has(node) || depth > 8) return undefined
    seen.add(node)
    const code = (node as { readonly code?: unknown }).code
    if (typeof code === "string" && isTlsCode(code)) return "tls"
    if (isAuthentication(node)) return "authentication"
    const inner = (node as { readonly errors?: unknown }).errors
    if (Array.isArray(inner)) {
      for (const e of inner) {
        const found = walk(e, depth + 1)
        if (found !== undefined) return found
      }
    }
    return walk((node as { readonly cause?: unknown }).cause, depth + 1)
  }
  return walk(error, 0)
}

/**
 * A thrown value as an object whose fields a driver reads (a non-object as its message).
 *
 * @since 0.1.0
 * @category verdicts
 */
export const fieldsOf = <A extends { readonly message?: string | undefined }>(error: unknown): A =>
  typeof error === "object" && error !== null ? (error as A) : ({ message: String(error) } as A)

/**
 * What a driver reads from one of its client's errors.
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorNames {
  /** Kafka's error names the broker answered with (`NOT_LEADER_OR_FOLLOWER`, …). */
  readonly protocol: ReadonlySet<string>
  /** The client saw an outage of its own (no connection, no answer in time, no broker). */
  readonly clientOutage: boolean
  /** The client says asking again may succeed. */
  readonly retriable: boolean
  /** The brokers refused the connection itself (see {@link findSecurity}). */
  readonly security?: Security | undefined
}

/**
 * How a failure should be handled: `unavailable` (an outage, says nothing about the request and
 * does not count as an attempt), `transient` (try again) or `permanent`.
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = "unavailable" | "transient" | "permanent"

const any = (names: ReadonlySet<string>, table: ReadonlySet<string>) => {
  for (const name of names) if (table.has(name)) return true
  return false
}

/**
 * The one decision: a refused connection (credentials, certificates) and a permanent broker name
 * win, then an outage, then anything the broker or the
 * client says may pass.
 *
 * @since 0.1.0
 * @category verdicts
 */
export const verdict = (names: ErrorNames): Kind => {
  if (names.security !== undefined) return "permanent"
  if (any(names.protocol, permanentNames)) return "permanent"
  if (any(names.protocol, unavailableNames)) return "unavailable"
  if (names.protocol.size === 0 && names.clientOutage) return "unavailable"
  if (any(names.protocol, producerStateNames) || names.retriable || names.clientOutage) return "transient"
  return "permanent"
}

/**
 * The classification of one client's errors, built by {@link make}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Protocol {
  readonly names: (error: unknown) => ErrorNames
  readonly describe: (error: unknown) => string
  readonly kind: (error: unknown) => Kind
  /** Whether the brokers refused the connection itself, and why. */
  readonly security: (error: unknown) => Security | undefined
  /** An outage: connection refused or lost, no answer in time, no leader, not coordinator, … */
  readonly isBrokerUnavailable: (error: unknown) => boolean
  /** Whether trying again may succeed. */
  readonly isRetriable: (error: unknown) => boolean
  /** The broker refused a record batch for its size. */
  readonly isRecordSizeError: (error: unknown) => boolean
  /** The broker does not know the topic. */
  readonly isUnknownTopic: (error: unknown) => boolean
  /** The broker answered with this name. */
  readonly has: (error: unknown, name: string) => boolean
  /**
   * The producer that saw this error must be replaced before the next send: after an uncertain
   * failure its sequence numbers may no longer match the broker's, and reusing them for other
   * records could make the broker discard those as duplicates.
   */
  readonly requiresProducerReset: (error: unknown) => boolean
  /**
   * Whether a broker call other than a send (metadata, offsets, topic creation, a consumer
   * starting) may succeed when asked again. "No such topic" is an answer to these calls, not a
   * hiccup, and producer-state errors do not concern them.
   */
  readonly isRetriableBrokerCall: (error: unknown) => boolean
  /**
   * An outage is `BrokerUnavailableError`, other transient errors retriable, the rest permanent.
   * A refused connection is `BrokerUnavailableError` too: it says nothing about the record, and
   * the relay pauses until credentials or certificates are fixed instead of failing rows.
   */
  readonly toPublishError: (topic: string, error: unknown) => PublishError
  /** Carries the verdict as `kind`, so a caller can stop asking at a permanent one. */
  readonly toAdminError: (operation: string, topic: string, error: unknown) => BrokerAdminError
  readonly toProbeError: (topic: string, error: unknown) => ProbeError
  /** Group-membership errors (see {@link fencedNames}) are retriable. */
  readonly toConsumerError: (operation: string, error: unknown) => ConsumerSourceError
}

/**
 * A client's {@link Protocol}, from how its errors name themselves and how they read.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (names: (error: unknown) => ErrorNames, describe: (error: unknown) => string): Protocol => {
  const kind = (error: unknown) => verdict(names(error))
  const security = (error: unknown) => names(error).security
  const has = (error: unknown, name: string) => names(error).protocol.has(name)
  const isRetriable = (error: unknown) => kind(error) !== "permanent"
  return {
    names,
    describe,
    kind,
    security,
    has,
    isBrokerUnavailable: (error) => kind(error) === "unavailable",
    isRetriable,
    isRecordSizeError: (error) => any(names(error).protocol, recordSizeNames),
    isUnknownTopic: (error) => has(error, UNKNOWN_TOPIC),
    requiresProducerReset: (error) => !any(names(error).protocol, permanentNames),
    isRetriableBrokerCall: (error) => {
      const protocol = names(error).protocol
      return !protocol.has(UNKNOWN_TOPIC) && !any(protocol, producerStateNames) && isRetriable(error)
    },
    toPublishError: (topic, error) => {
      const reason = describe(error)
      if (security(error) !== undefined) return new BrokerUnavailableError({ topic, reason })
      switch (kind(error)) {
        case "unavailable":
          return new BrokerUnavailableError({ topic, reason })
        case "transient":
          return new RetriablePublishError({ topic, reason })
        case "permanent":
          return new PermanentPublishError({ topic, reason })
      }
    },
    toAdminError: (operation, topic, error) =>
      new BrokerAdminError({ operation, topic, reason: describe(error), kind: kind(error), security: security(error) }),
    toProbeError: (topic, error) => new ProbeError({ topic, reason: describe(error) }),
    toConsumerError: (operation, error) =>
      new ConsumerSourceError({
        operation,
        reason: describe(error),
        retriable: any(names(error).protocol, fencedNames) || isRetriable(error)
      })
  }
}
