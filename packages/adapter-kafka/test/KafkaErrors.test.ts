// How kafkajs failures become the library's typed errors: what a relay retries and what it
// gives up on.
import { assert, describe, it } from "@effect/vitest"
import Kafkajs from "kafkajs"
import * as KafkaErrors from "../src/KafkaErrors.ts"

const protocol = (type: string, retriable: boolean) =>
  new Kafkajs.KafkaJSProtocolError({ message: `broker says ${type}`, type, code: 0, retriable } as never)

const named = (name: string, message: string) => Object.assign(new Error(message), { name })

const exhausted = (cause: Error) =>
  new Kafkajs.KafkaJSNumberOfRetriesExceeded(cause, { retryCount: 5, retryTime: 1000 })

describe("KafkaErrors", () => {
  it("records the broker will never accept are permanent", () => {
    for (const type of [
      "MESSAGE_TOO_LARGE",
      "INVALID_TOPIC_EXCEPTION",
      "TOPIC_AUTHORIZATION_FAILED",
      "INVALID_RECORD"
    ]) {
      const error = KafkaErrors.toPublishError("orders", protocol(type, false))
      assert.strictEqual(error._tag, "PermanentPublishError", type)
      assert.match(error.message, new RegExp(type))
    }
  })

  it("an outage is BrokerUnavailableError: connection, timeout, no broker, no leader, no coordinator", () => {
    const cases: ReadonlyArray<Error> = [
      new Kafkajs.KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:9092"),
      named("KafkaJSConnectionClosedError", "Closed connection"),
      new Kafkajs.KafkaJSRequestTimeoutError("Request Produce(key: 0, version: 7) timed out"),
      named("KafkaJSNoBrokerAvailableError", "No broker available"),
      named("KafkaJSBrokerNotFound", "Broker 1 not found in the cached metadata"),
      // kafkajs's typings declare these without arguments; built by name as kafkajs throws them.
      named("KafkaJSMetadataNotLoaded", "Cluster metadata not loaded"),
      named("KafkaJSTopicMetadataNotLoaded", "Topic metadata not loaded"),
      named("KafkaJSGroupCoordinatorNotFound", "Failed to find group coordinator"),
      named("KafkaJSLockTimeout", "Timeout while acquiring lock"),
      ...[
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_FOR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "NOT_COORDINATOR",
        "NOT_COORDINATOR_FOR_GROUP",
        "COORDINATOR_NOT_AVAILABLE",
        "GROUP_COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "GROUP_LOAD_IN_PROGRESS",
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "BROKER_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS"
      ].map((type) => protocol(type, true))
    ]
    for (const error of cases) {
      const label = `${error.name} ${(error as { type?: string }).type ?? ""}`
      assert.isTrue(KafkaErrors.isBrokerUnavailable(error), label)
      const mapped = KafkaErrors.toPublishError("orders", error)
      assert.strictEqual(mapped._tag, "BrokerUnavailableError", label)
      assert.strictEqual(mapped.topic, "orders")
      // Wrapped by kafkajs's retrier, it is still an outage.
      assert.strictEqual(KafkaErrors.toPublishError("orders", exhausted(error))._tag, "BrokerUnavailableError", label)
    }
  })

  it("kafkajs's TypeError when no broker answers a metadata request is an outage, not a permanent failure", () => {
    // kafkajs 2.2.4: an outage that starts while its cached metadata is fresh makes
    // `admin.fetchTopicMetadata` read `.topicMetadata` of the `null` that `withBroker` returns
    // when every broker failed. The V8 error, made the same way:
    const nullMetadata = (() => {
      try {
        const metadata = JSON.parse("null") as { topicMetadata: unknown }
        return metadata.topicMetadata
      } catch (error) {
        return error
      }
    })()
    assert.instanceOf(nullMetadata, TypeError)
    assert.isTrue(KafkaErrors.isBrokerUnavailable(nullMetadata))
    const mapped = KafkaErrors.toPublishError("orders", nullMetadata)
    assert.strictEqual(mapped._tag, "BrokerUnavailableError")
    assert.match(mapped.message, /no broker answered a metadata request/)
    assert.strictEqual(
      KafkaErrors.toPublishError("orders", exhausted(nullMetadata as Error))._tag,
      "BrokerUnavailableError"
    )
    // Any other TypeError is not guessed to be an outage.
    assert.isFalse(KafkaErrors.isBrokerUnavailable(new TypeError("Cannot read properties of undefined (reading 'x')")))
  })

  it("errors about the record or the producer's state stay retriable or permanent, never 'unavailable'", () => {
    const cases: ReadonlyArray<[Error, string]> = [
      [protocol("OUT_OF_ORDER_SEQUENCE_NUMBER", false), "RetriablePublishError"],
      [protocol("UNKNOWN_PRODUCER_ID", false), "RetriablePublishError"],
      [protocol("UNKNOWN_TOPIC_OR_PARTITION", true), "RetriablePublishError"],
      [protocol("CORRUPT_MESSAGE", true), "PermanentPublishError"],
      [protocol("MESSAGE_TOO_LARGE", false), "PermanentPublishError"],
      [protocol("RECORD_LIST_TOO_LARGE", false), "PermanentPublishError"],
      [protocol("INVALID_RECORD", false), "PermanentPublishError"],
      [protocol("TOPIC_AUTHORIZATION_FAILED", false), "PermanentPublishError"],
      [exhausted(protocol("OUT_OF_ORDER_SEQUENCE_NUMBER", false)), "RetriablePublishError"],
      [exhausted(protocol("MESSAGE_TOO_LARGE", false)), "PermanentPublishError"],
      [Object.assign(new Error("something transient"), { retriable: true }), "RetriablePublishError"]
    ]
    for (const [error, tag] of cases) {
      assert.isFalse(KafkaErrors.isBrokerUnavailable(error), error.message)
      assert.strictEqual(KafkaErrors.toPublishError("orders", error)._tag, tag, error.message)
    }
  })

  it("size verdicts are recognised, also wrapped, so the publisher can split the batch", () => {
    assert.isTrue(KafkaErrors.isRecordSizeError(protocol("MESSAGE_TOO_LARGE", false)))
    assert.isTrue(KafkaErrors.isRecordSizeError(exhausted(protocol("RECORD_LIST_TOO_LARGE", false))))
    assert.isFalse(KafkaErrors.isRecordSizeError(protocol("INVALID_RECORD", false)))
    assert.isFalse(KafkaErrors.isRecordSizeError(new Kafkajs.KafkaJSConnectionError("refused")))
  })

  it("an exhausted retry is described by the error it gave up on", () => {
    assert.match(
      KafkaErrors.describe(exhausted(protocol("NOT_ENOUGH_REPLICAS", true))),
      /NOT_ENOUGH_REPLICAS.*via KafkaJSNumberOfRetriesExceeded/
    )
  })

  it("producer-state errors are retriable and replace the producer", () => {
    const error = protocol("OUT_OF_ORDER_SEQUENCE_NUMBER", false)
    assert.isTrue(KafkaErrors.isRetriable(error))
    assert.isTrue(KafkaErrors.requiresProducerReset(error))
  })

  it("uncertain failures replace the producer; broker verdicts on a record do not", () => {
    assert.isTrue(KafkaErrors.requiresProducerReset(new Kafkajs.KafkaJSRequestTimeoutError("timed out")))
    assert.isFalse(KafkaErrors.requiresProducerReset(protocol("MESSAGE_TOO_LARGE", false)))
  })

  it("a commit fenced by a rebalance is a retriable consumer error", () => {
    for (const type of ["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"]) {
      const error = KafkaErrors.toConsumerError("commit", protocol(type, false))
      assert.strictEqual(error._tag, "ConsumerSourceError")
      assert.isTrue(error.retriable, type)
      assert.strictEqual(error.operation, "commit")
    }
    assert.isFalse(KafkaErrors.toConsumerError("commit", protocol("GROUP_AUTHORIZATION_FAILED", false)).retriable)
  })

  it("something that is not a kafkajs error is described, and not retried", () => {
    const error = KafkaErrors.toPublishError("t", new TypeError("value must be a Buffer"))
    assert.strictEqual(error._tag, "PermanentPublishError")
    assert.match(error.message, /TypeError: value must be a Buffer/)
  })
})
