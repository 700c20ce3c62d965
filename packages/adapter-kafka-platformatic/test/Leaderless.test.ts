// A metadata answer that @platformatic/kafka turned into an error because partitions had no
// leader: the layout is read from the answer the error carries.
import { assert, describe, it } from "@effect/vitest"
import * as Leaderless from "../src/internal/leaderless.ts"

const answer = (partitions: ReadonlyArray<[number, number, number]>, topicError = 0) => ({
  topics: [
    {
      errorCode: topicError,
      name: "orders",
      partitions: partitions.map(([partitionIndex, errorCode, leaderId]) => ({ partitionIndex, errorCode, leaderId }))
    }
  ]
})

// The client retries and wraps: the answer sits on an inner error.
const wrapped = (response: unknown) => ({ errors: [{ errors: [], response }] })

describe("Leaderless.fromError", () => {
  it("partitions answered LEADER_NOT_AVAILABLE are leaderless, the others keep their leader", () => {
    const layout = Leaderless.fromError(
      wrapped(
        answer([
          [1, 0, 2],
          [0, 0, 1],
          [2, 5, -1]
        ])
      ),
      "orders"
    )
    assert.deepStrictEqual(layout, { partitions: 3, leaders: [1, 2, -1], leaderless: [2] })
  })

  it("any other error, or another topic, is not read as a layout", () => {
    assert.isUndefined(Leaderless.fromError(wrapped(answer([[0, 29, -1]])), "orders"), "TOPIC_AUTHORIZATION_FAILED")
    assert.isUndefined(Leaderless.fromError(wrapped(answer([[0, 5, -1]], 3)), "orders"), "a topic-level error")
    assert.isUndefined(Leaderless.fromError(wrapped(answer([[0, 5, -1]])), "payments"))
    assert.isUndefined(Leaderless.fromError(new Error("connection refused"), "orders"))
  })
})
