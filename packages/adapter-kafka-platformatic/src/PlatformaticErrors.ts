/**
 * How @platformatic/kafka names its failures, read into the Kafka layer's one classification
 * (`@effect-outbox/kafka/KafkaProtocol`), so the verdicts are those of the kafkajs driver: an
 * outage is `BrokerUnavailableError`, other transient errors retriable, verdicts about the
 * record, topic or permissions permanent.
 *
 * @platformatic/kafka reports broker answers as `ProtocolError`s (`apiId` is Kafka's error name,
 * e.g. `MESSAGE_TOO_LARGE`) wrapped in `ResponseError` / `MultipleErrors` (one per retry), and
 * client-side trouble as `NetworkError` / `TimeoutError` (`code` `PLT_KFK_NETWORK`).
 *
 * @since 0.1.0
 */
import * as KafkaProtocol from "@effect-outbox/kafka/KafkaProtocol"

interface PlatformaticLikeError {
  readonly name?: string
  readonly message?: string
  readonly code?: string
  readonly apiId?: string
  readonly canRetry?: boolean
  readonly errors?: ReadonlyArray<unknown>
  readonly cause?: unknown
}

const asError = KafkaProtocol.fieldsOf<PlatformaticLikeError>

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

// Client-side trouble with the connection: refused, closed, timed out, a reply that does not
// match its request, or the client closed under a retry (a producer being replaced).
/** The client's own refusal of a call (`PLT_KFK_USER`) whose message starts with `text`. */
const userError = (leaf: PlatformaticLikeError, text: string) =>
  leaf.code === "PLT_KFK_USER" && (leaf.message ?? "").startsWith(text)

const isNetworkLeaf = (leaf: PlatformaticLikeError) =>
  leaf.code === "PLT_KFK_NETWORK" ||
  (leaf.code !== undefined && KafkaProtocol.socketCodes.has(leaf.code)) ||
  leaf.code === "PLT_KFK_TIMEOUT" ||
  leaf.code === "PLT_KFK_UNEXPECTED_CORRELATION_ID" ||
  leaf.code === "PLT_KFK_UNFINISHED_WRITE_BUFFER" ||
  leaf.name === "TimeoutError" ||
  userError(leaf, "Client closed while retrying")

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

const isAuthentication = (node: object) =>
  (node as PlatformaticLikeError).code === "PLT_KFK_AUTHENTICATION" ||
  (node as PlatformaticLikeError).apiId === KafkaProtocol.SASL_AUTHENTICATION_FAILED

/**
 * What the Kafka layer reads from a @platformatic/kafka error: Kafka's error names in its tree
 * (the client's own "Unknown topic" read as `UNKNOWN_TOPIC_OR_PARTITION`), whether every leaf is
 * a connection failure, and whether any leaf may pass.
 *
 * @since 0.1.0
 * @category classification
 */
export const errorNames = (error: unknown): KafkaProtocol.ErrorNames => {
  const all = leaves(error)
  const protocol = new Set(all.flatMap((leaf) => (leaf.apiId === undefined ? [] : [leaf.apiId])))
  if (all.some((leaf) => userError(leaf, "Unknown topic"))) {
    protocol.add(KafkaProtocol.UNKNOWN_TOPIC)
  }
  return {
    protocol,
    clientOutage: all.length > 0 && all.every((leaf) => leaf.apiId === undefined && isNetworkLeaf(leaf)),
    retriable: all.some((leaf) => leaf.canRetry === true || isNetworkLeaf(leaf)),
    // Both arrive inside a NetworkError: the socket's certificate error, or the SASL exchange's.
    security: KafkaProtocol.findSecurity(error, isAuthentication)
  }
}

/**
 * The @platformatic/kafka classification (see `KafkaProtocol.Protocol`).
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
  isBrokerUnavailable,
  isRetriable,
  isRecordSizeError,
  isUnknownTopic,
  requiresProducerReset,
  isRetriableBrokerCall,
  toPublishError,
  toAdminError,
  toProbeError,
  toConsumerError
} = protocol
