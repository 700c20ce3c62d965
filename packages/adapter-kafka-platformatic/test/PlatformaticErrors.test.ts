// The error verdicts of PlatformaticErrors on the client's own error classes, and the Java
// client's key partitioning.
import { assert, describe, it } from "@effect/vitest"
import { MultipleErrors, NetworkError, ProtocolError, TimeoutError, UserError } from "@platformatic/kafka"
import * as PlatformaticErrors from "../src/PlatformaticErrors.ts"

const response = (...ids: Array<string>) =>
  new MultipleErrors(
    "Producing messages failed.",
    ids.map((id) => new ProtocolError(id))
  )

describe("PlatformaticErrors", () => {
  it("an unreachable broker is BrokerUnavailableError", () => {
    const refused = new MultipleErrors("metadata failed 2 times.", [
      new MultipleErrors("Cannot connect to any broker.", [new NetworkError("Connection to 127.0.0.1:1 failed.")]),
      new TimeoutError("Request timed out")
    ])
    assert.strictEqual(PlatformaticErrors.toPublishError("t", refused)._tag, "BrokerUnavailableError")
    // What the client really throws: the socket's error as the NetworkError's cause.
    const socket = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" })
    const wrapped = new MultipleErrors("metadata failed 4 times.", [
      new MultipleErrors("Cannot connect to any broker.", [
        new NetworkError("Connection to 127.0.0.1:1 failed.", { cause: socket })
      ])
    ])
    assert.strictEqual(PlatformaticErrors.toPublishError("t", wrapped)._tag, "BrokerUnavailableError")
    assert.isTrue(PlatformaticErrors.isRetriableBrokerCall(wrapped))
    assert.strictEqual(
      PlatformaticErrors.toPublishError("t", new UserError("Client closed while retrying produce."))._tag,
      "BrokerUnavailableError"
    )
    assert.strictEqual(
      PlatformaticErrors.toPublishError("t", response("NOT_LEADER_OR_FOLLOWER"))._tag,
      "BrokerUnavailableError"
    )
  })

  it("a verdict about the record is permanent, and a size verdict is recognised", () => {
    const tooLarge = response("MESSAGE_TOO_LARGE")
    assert.strictEqual(PlatformaticErrors.toPublishError("t", tooLarge)._tag, "PermanentPublishError")
    assert.isTrue(PlatformaticErrors.isRecordSizeError(tooLarge))
    assert.isFalse(PlatformaticErrors.requiresProducerReset(tooLarge))
    assert.strictEqual(
      PlatformaticErrors.toPublishError("t", response("TOPIC_AUTHORIZATION_FAILED"))._tag,
      "PermanentPublishError"
    )
  })

  it("producer-state errors are retriable and need a fresh producer", () => {
    const outOfOrder = response("OUT_OF_ORDER_SEQUENCE_NUMBER")
    assert.strictEqual(PlatformaticErrors.toPublishError("t", outOfOrder)._tag, "RetriablePublishError")
    assert.isTrue(PlatformaticErrors.requiresProducerReset(outOfOrder))
  })

  it("an unknown topic is an answer to broker calls, not a hiccup", () => {
    const unknown = new UserError("Unknown topic nope.")
    assert.isTrue(PlatformaticErrors.isUnknownTopic(unknown))
    assert.isFalse(PlatformaticErrors.isRetriableBrokerCall(unknown))
    assert.isTrue(PlatformaticErrors.isRetriableBrokerCall(response("COORDINATOR_LOAD_IN_PROGRESS")))
  })

  it("a fenced group member's commit is retriable", () => {
    assert.isTrue(PlatformaticErrors.toConsumerError("commit", response("REBALANCE_IN_PROGRESS")).retriable)
    assert.isFalse(PlatformaticErrors.toConsumerError("commit", response("GROUP_AUTHORIZATION_FAILED")).retriable)
  })

  it("describe names the Kafka error and keeps the messages", () => {
    const text = PlatformaticErrors.describe(response("MESSAGE_TOO_LARGE"))
    assert.include(text, "MESSAGE_TOO_LARGE")
    assert.include(text, "Producing messages failed.")
  })
})
