// How kafkajs failures become the library's typed errors: what a relay retries and what it
// gives up on.
import { assert, describe, it } from "@effect/vitest"
import Kafkajs from "kafkajs"
import * as KafkaErrors from "../src/KafkaErrors.ts"

const protocol = (type: string, retriable: boolean) =>
  new Kafkajs.KafkaJSProtocolError({ message: `broker says ${type}`, type, code: 0, retriable } as never)

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

  it("retriable broker errors, lost connections and timeouts are retriable", () => {
    const cases = [
      protocol("NOT_LEADER_FOR_PARTITION", true),
      protocol("REQUEST_TIMED_OUT", true),
      new Kafkajs.KafkaJSConnectionError("Connection error: ECONNREFUSED"),
      new Kafkajs.KafkaJSRequestTimeoutError("Request Produce(key: 0, version: 7) timed out"),
      Object.assign(new Error("Closed connection"), { name: "KafkaJSConnectionClosedError" })
    ]
    for (const error of cases)
      assert.strictEqual(KafkaErrors.toPublishError("orders", error)._tag, "RetriablePublishError", error.name)
  })

  it("an exhausted retry is judged by the error it gave up on", () => {
    assert.strictEqual(
      KafkaErrors.toPublishError("t", exhausted(protocol("NOT_ENOUGH_REPLICAS", true)))._tag,
      "RetriablePublishError"
    )
    assert.strictEqual(
      KafkaErrors.toPublishError("t", exhausted(protocol("MESSAGE_TOO_LARGE", false)))._tag,
      "PermanentPublishError"
    )
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
