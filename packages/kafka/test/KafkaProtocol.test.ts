// The one verdict every Kafka driver's errors go through, on the names a driver extracts, and the
// typed errors and predicates built on it.
import { assert, describe, it } from "@effect/vitest"
import * as KafkaProtocol from "../src/KafkaProtocol.ts"

const names = (protocol: ReadonlyArray<string>, client: Partial<KafkaProtocol.ErrorNames> = {}) => ({
  protocol: new Set(protocol),
  clientOutage: false,
  retriable: false,
  ...client
})

// A driver whose "errors" are the extracted names themselves.
const protocol = KafkaProtocol.make(
  (error) => error as KafkaProtocol.ErrorNames,
  (error) => [...(error as KafkaProtocol.ErrorNames).protocol].join(",") || "client error"
)

describe("KafkaProtocol.verdict", () => {
  it("a broker verdict about the record, topic or permissions is permanent, even beside an outage", () => {
    assert.strictEqual(KafkaProtocol.verdict(names(["MESSAGE_TOO_LARGE"], { retriable: true })), "permanent")
    assert.strictEqual(KafkaProtocol.verdict(names(["TOPIC_AUTHORIZATION_FAILED"])), "permanent")
    assert.strictEqual(KafkaProtocol.verdict(names(["NOT_LEADER_OR_FOLLOWER", "INVALID_RECORD"])), "permanent")
  })

  it("no leader, a coordinator moving or loading (old and new spellings) is unavailable", () => {
    for (const name of [
      "LEADER_NOT_AVAILABLE",
      "NOT_LEADER_FOR_PARTITION",
      "NOT_LEADER_OR_FOLLOWER",
      "NOT_COORDINATOR",
      "NOT_COORDINATOR_FOR_GROUP",
      "COORDINATOR_LOAD_IN_PROGRESS",
      "GROUP_LOAD_IN_PROGRESS",
      "NOT_ENOUGH_REPLICAS"
    ]) {
      assert.strictEqual(KafkaProtocol.verdict(names([name])), "unavailable", name)
    }
  })

  it("a client-side outage is unavailable only when the broker said nothing", () => {
    assert.strictEqual(KafkaProtocol.verdict(names([], { clientOutage: true })), "unavailable")
    assert.strictEqual(KafkaProtocol.verdict(names(["REBALANCE_IN_PROGRESS"], { clientOutage: true })), "transient")
  })

  it("producer-state errors and what the client calls retriable are transient; the rest is permanent", () => {
    assert.strictEqual(KafkaProtocol.verdict(names(["OUT_OF_ORDER_SEQUENCE_NUMBER"])), "transient")
    assert.strictEqual(KafkaProtocol.verdict(names(["SOMETHING_NEW"], { retriable: true })), "transient")
    assert.strictEqual(KafkaProtocol.verdict(names(["SOMETHING_NEW"])), "permanent")
    assert.strictEqual(KafkaProtocol.verdict(names([])), "permanent")
  })
})

describe("KafkaProtocol.make", () => {
  it("maps each verdict to its publish error", () => {
    assert.strictEqual(protocol.toPublishError("t", names(["NOT_LEADER_OR_FOLLOWER"]))._tag, "BrokerUnavailableError")
    assert.strictEqual(protocol.toPublishError("t", names(["PRODUCER_FENCED"]))._tag, "RetriablePublishError")
    assert.strictEqual(protocol.toPublishError("t", names(["MESSAGE_TOO_LARGE"]))._tag, "PermanentPublishError")
  })

  it("an unknown topic and producer-state errors are not retried as broker calls; a loading coordinator is", () => {
    assert.isFalse(protocol.isRetriableBrokerCall(names(["UNKNOWN_TOPIC_OR_PARTITION"], { retriable: true })))
    assert.isFalse(protocol.isRetriableBrokerCall(names(["UNKNOWN_PRODUCER_ID"])))
    assert.isTrue(protocol.isRetriableBrokerCall(names(["COORDINATOR_LOAD_IN_PROGRESS"])))
    assert.isTrue(protocol.isUnknownTopic(names(["UNKNOWN_TOPIC_OR_PARTITION"])))
  })

  it("a size verdict is recognised; only a permanent verdict keeps the producer", () => {
    assert.isTrue(protocol.isRecordSizeError(names(["RECORD_LIST_TOO_LARGE"])))
    assert.isFalse(protocol.requiresProducerReset(names(["RECORD_LIST_TOO_LARGE"])))
    assert.isTrue(protocol.requiresProducerReset(names([], { clientOutage: true })))
  })

  it("a member fenced by a rebalance gets a retriable consumer error", () => {
    assert.isTrue(protocol.toConsumerError("commit", names(["ILLEGAL_GENERATION"])).retriable)
    assert.isTrue(protocol.toConsumerError("commit", names(["REBALANCE_IN_PROGRESS"])).retriable)
    assert.isFalse(protocol.toConsumerError("commit", names(["GROUP_AUTHORIZATION_FAILED"])).retriable)
  })
})

describe("KafkaProtocol.findSecurity", () => {
  const saslFailed = (node: object) => (node as { readonly name?: string }).name === "SaslFailed"

  it("finds a certificate verdict or a refused login anywhere in a wrapped error tree", () => {
    const tls = { name: "NetworkError", errors: [{ name: "Retry", cause: { code: "SELF_SIGNED_CERT_IN_CHAIN" } }] }
    assert.strictEqual(KafkaProtocol.findSecurity(tls, saslFailed), "tls")
    assert.strictEqual(
      KafkaProtocol.findSecurity({ cause: { code: "ERR_TLS_CERT_ALTNAME_INVALID" } }, saslFailed),
      "tls"
    )
    assert.strictEqual(
      KafkaProtocol.findSecurity({ code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" }, saslFailed),
      "tls"
    )
    assert.strictEqual(KafkaProtocol.findSecurity({ cause: { name: "SaslFailed" } }, saslFailed), "authentication")
    assert.strictEqual(KafkaProtocol.findSecurity({ code: "ECONNREFUSED" }, saslFailed), undefined)
    const loop: { cause?: unknown } = {}
    loop.cause = loop
    assert.strictEqual(KafkaProtocol.findSecurity(loop, saslFailed), undefined)
  })

  it("a refused connection is permanent for a broker call, but an outage for a record", () => {
    const refused = names([], { clientOutage: true, retriable: true, security: "tls" })
    assert.strictEqual(KafkaProtocol.verdict(refused), "permanent")
    assert.strictEqual(protocol.toPublishError("orders", refused)._tag, "BrokerUnavailableError")
    const admin = protocol.toAdminError("listTopics", "*", refused)
    assert.strictEqual(admin.kind, "permanent")
    assert.strictEqual(admin.security, "tls")
  })
})
