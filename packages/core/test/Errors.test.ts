// The failure vocabulary: every store and publish error says what a retry means (its kind).
import { assert, describe, it } from "@effect/vitest"
import {
  BrokerUnavailableError,
  OutboxStoreError,
  PermanentPublishError,
  RetriablePublishError,
  StoreError,
  UnknownPartitionError
} from "../src/Errors.ts"

describe("StoreError", () => {
  it("carries the kind its adapter decided; retriable is any kind but permanent", () => {
    for (const [kind, retriable] of [
      ["unavailable", true],
      ["transient", true],
      ["permanent", false]
    ] as const) {
      const error = new StoreError({ operation: "outbox.claim", reason: "x", kind })
      assert.strictEqual(error.kind, kind)
      assert.strictEqual(error.retriable, retriable)
      assert.strictEqual(error.message, "outbox store outbox.claim failed: x")
    }
  })

  it("the deprecated OutboxStoreError builds a StoreError from the former fields", () => {
    const retriable = new OutboxStoreError({ operation: "q", reason: "gone", retriable: true })
    assert.instanceOf(retriable, StoreError)
    assert.strictEqual(retriable._tag, "StoreError")
    assert.strictEqual(retriable.kind, "unavailable")
    assert.isTrue(retriable.retriable)
    const cause = new Error("constraint")
    const refused = new OutboxStoreError({ operation: "q", reason: "no", retriable: false, cause })
    assert.strictEqual(refused.kind, "permanent")
    assert.strictEqual(refused.cause, cause)
  })
})

describe("publish errors", () => {
  it("each says what a retry means", () => {
    assert.strictEqual(new BrokerUnavailableError({ topic: "t", reason: "no leader" }).kind, "unavailable")
    assert.strictEqual(new RetriablePublishError({ topic: "t", reason: "timeout" }).kind, "transient")
    assert.strictEqual(new PermanentPublishError({ topic: "t", reason: "too large" }).kind, "permanent")
    assert.strictEqual(new UnknownPartitionError({ topic: "t", partition: 9 }).kind, "permanent")
  })
})
