import { assert, describe, it } from "@effect/vitest"
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type * as InMemoryDatabase from "../src/InMemoryDatabase.ts"
import * as OutboxInvariants from "../src/OutboxInvariants.ts"

const id = (n: number) => `00000000-0000-7000-8000-${n.toString().padStart(12, "0")}` as EventId

const message = (
  n: number,
  key: string | null,
  status: OutboxStatus,
  offset?: number,
  lastError: string | null = null
): OutboxMessage => ({
  id: id(n),
  seq: n,
  topic: "t",
  key,
  partition: 0,
  headers: { "event-id": id(n) },
  payload: new Uint8Array(),
  status,
  attempts: 0,
  availableAt: 0,
  leaseOwner: null,
  leaseExpiresAt: null,
  receipt: offset === undefined ? null : { topic: "t", partition: 0, offset: String(offset) },
  lastError,
  createdAt: 0,
  updatedAt: 0,
  publishedAt: null,
  processedAt: null
})

const record = (n: number, offset: number): ConsumerRecord => ({
  topic: "t",
  partition: 0,
  offset: String(offset),
  key: null,
  headers: { "event-id": id(n) },
  value: new Uint8Array(),
  timestamp: 0
})

type Change = InMemoryDatabase.StatusChange
const insert = (n: number): Change => ({ id: id(n), from: null, to: "PENDING", at: 0, operation: "insert" })
const move = (n: number, from: OutboxStatus, to: OutboxStatus): Change => ({
  id: id(n),
  from,
  to,
  at: 0,
  operation: "transition"
})
const publishedHistory = (n: number) => [
  insert(n),
  move(n, "PENDING", "DISPATCHING"),
  move(n, "DISPATCHING", "PUBLISHED")
]

const invariants = (violations: ReadonlyArray<OutboxInvariants.Violation>) => violations.map((v) => v.invariant)

describe("OutboxInvariants.check", () => {
  // Two events of key k, one transaction each; tx 1 ends before tx 2 begins.
  const sequential = [
    { ids: [id(1)], keys: ["k"], begin: 1, end: 2 },
    { ids: [id(2)], keys: ["k"], begin: 3, end: 4 }
  ]

  it("accepts a correct run", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential,
      rows: [message(1, "k", "PUBLISHED", 0), message(2, "k", "PUBLISHED", 1)],
      history: [...publishedHistory(1), ...publishedHistory(2)],
      log: [record(1, 0), record(2, 1)]
    })
    assert.deepStrictEqual(violations, [])
  })

  it("accepts a duplicate after the later event: only the first appearance counts", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential,
      rows: [message(1, "k", "PUBLISHED", 2), message(2, "k", "PUBLISHED", 1)],
      history: [...publishedHistory(1), ...publishedHistory(2)],
      log: [record(1, 0), record(2, 1), record(1, 2)]
    })
    assert.deepStrictEqual(violations, [])
  })

  it("reports per-key order broken across transactions that did not overlap", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential,
      rows: [message(1, "k", "PUBLISHED", 1), message(2, "k", "PUBLISHED", 0)],
      history: [...publishedHistory(1), ...publishedHistory(2)],
      log: [record(2, 0), record(1, 1)]
    })
    assert.deepStrictEqual(invariants(violations), ["order"])
  })

  it("does not order overlapping transactions", () => {
    const violations = OutboxInvariants.check({
      transactions: [
        { ids: [id(1)], keys: ["k"], begin: 1, end: 4 },
        { ids: [id(2)], keys: ["k"], begin: 2, end: 3 }
      ],
      rows: [message(1, "k", "PUBLISHED", 1), message(2, "k", "PUBLISHED", 0)],
      history: [...publishedHistory(2), ...publishedHistory(1)],
      log: [record(2, 0), record(1, 1)]
    })
    assert.deepStrictEqual(violations, [])
  })

  it("orders events of one transaction by enqueue order", () => {
    const violations = OutboxInvariants.check({
      transactions: [{ ids: [id(1), id(2)], keys: ["k", "k"], begin: 1, end: 2 }],
      rows: [message(1, "k", "PUBLISHED", 1), message(2, "k", "PUBLISHED", 0)],
      history: [...publishedHistory(1), ...publishedHistory(2)],
      log: [record(2, 0), record(1, 1)]
    })
    assert.include(invariants(violations), "order")
  })

  it("reports a committed event that never settled as lost", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "DISPATCHING")],
      history: [insert(1), move(1, "PENDING", "DISPATCHING")],
      log: []
    })
    assert.deepStrictEqual(invariants(violations), ["loss"])
  })

  it("reports a PUBLISHED row whose receipt is not its record", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "PUBLISHED", 5)],
      history: publishedHistory(1),
      log: [record(1, 0)]
    })
    assert.deepStrictEqual(invariants(violations), ["loss"])
  })

  it("reports a rolled-back event that reached the broker as a phantom", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [],
      history: [],
      log: [record(1, 0)]
    })
    assert.deepStrictEqual(invariants(violations), ["phantom"])
  })

  it("reports a move the lifecycle forbids, and a move from a status the row was not in", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "PENDING")],
      history: [
        insert(1),
        move(1, "PENDING", "DISPATCHING"),
        move(1, "DISPATCHING", "PUBLISHED"),
        move(1, "PUBLISHED", "PENDING")
      ],
      log: [record(1, 0)]
    })
    assert.include(invariants(violations), "transition")
    const fromWrong = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "PUBLISHED", 0)],
      history: [insert(1), move(1, "DISPATCHING", "PUBLISHED")],
      log: [record(1, 0)]
    })
    assert.deepStrictEqual(invariants(fromWrong), ["transition"])
  })

  it("allows the operator's requeue out of FAILURE only when asked to", () => {
    const history = [
      insert(1),
      move(1, "PENDING", "DISPATCHING"),
      move(1, "DISPATCHING", "FAILURE"),
      move(1, "FAILURE", "PENDING"),
      move(1, "PENDING", "DISPATCHING"),
      move(1, "DISPATCHING", "PUBLISHED")
    ]
    const observation = {
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "PUBLISHED", 0)],
      history,
      log: [record(1, 0)]
    }
    assert.deepStrictEqual(invariants(OutboxInvariants.check(observation)), ["transition"])
    assert.deepStrictEqual(OutboxInvariants.check({ ...observation, allowRequeue: true }), [])
  })

  it("reports a FAILURE without a reason", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential.slice(0, 1),
      rows: [message(1, "k", "FAILURE", undefined, "")],
      history: [insert(1), move(1, "PENDING", "DISPATCHING"), move(1, "DISPATCHING", "FAILURE")],
      log: []
    })
    assert.deepStrictEqual(invariants(violations), ["failure_reason"])
  })

  it("lets a later event pass an earlier one that ended FAILURE", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential,
      rows: [message(1, "k", "FAILURE", undefined, "record too large"), message(2, "k", "PUBLISHED", 0)],
      history: [
        insert(1),
        move(1, "PENDING", "DISPATCHING"),
        move(1, "DISPATCHING", "FAILURE"),
        ...publishedHistory(2)
      ],
      log: [record(2, 0)]
    })
    assert.deepStrictEqual(violations, [])
  })

  it("reports a later event marked PUBLISHED while an earlier one of its key is still pending (prefix)", () => {
    const violations = OutboxInvariants.check({
      transactions: sequential,
      rows: [message(1, "k", "PUBLISHED", 0), message(2, "k", "PUBLISHED", 1)],
      history: [
        insert(1),
        insert(2),
        move(1, "PENDING", "DISPATCHING"),
        move(2, "PENDING", "DISPATCHING"),
        move(2, "DISPATCHING", "PUBLISHED"),
        move(1, "DISPATCHING", "PUBLISHED")
      ],
      log: [record(1, 0), record(2, 1)]
    })
    assert.deepStrictEqual(invariants(violations), ["prefix"])
  })
})
