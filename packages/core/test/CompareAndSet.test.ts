import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as CompareAndSet from "../src/CompareAndSet.ts"
import * as Lifecycle from "../src/Lifecycle.ts"
import type { EventId, OutboxMessage } from "../src/OutboxMessage.ts"
import type { TransitionRequest } from "../src/OutboxStore.ts"

type Status = Lifecycle.OutboxStatus

const id = "0190a5c0-0000-7000-8000-000000000001" as EventId
const receipt = { topic: "t", partition: 0, offset: "7" }

const row = (status: Status, lease: string | null = status === "DISPATCHING" ? "relay#1" : null): OutboxMessage => ({
  id,
  seq: 1,
  topic: "t",
  key: "k",
  partition: null,
  headers: {},
  payload: new Uint8Array(),
  status,
  attempts: 2,
  availableAt: 10,
  leaseOwner: lease,
  leaseExpiresAt: lease === null ? null : 500,
  receipt: null,
  lastError: "earlier",
  createdAt: 1,
  updatedAt: 5,
  publishedAt: null,
  processedAt: null
})

const request = (over: Partial<TransitionRequest>): TransitionRequest => ({
  id,
  from: ["DISPATCHING"],
  to: "PUBLISHED",
  patch: {},
  now: 100,
  ...over
})

describe("CompareAndSet", () => {
  it("a missing row is rejected, with no current status and nothing written", () => {
    const { next, outcome } = CompareAndSet.decide(undefined, request({}))
    assert.deepStrictEqual(outcome, { id, outcome: "rejected", current: undefined })
    assert.isUndefined(next)
  })

  it("applied: the status moves, the patch is written, the lease cleared, updatedAt is now", () => {
    const { next, outcome } = CompareAndSet.decide(
      row("DISPATCHING"),
      request({ patch: { receipt, publishedAt: 90, attempts: 3, lastError: null } })
    )
    assert.deepStrictEqual(outcome, { id, outcome: "applied", current: "PUBLISHED" })
    assert.deepStrictEqual(next, {
      ...row("DISPATCHING"),
      status: "PUBLISHED",
      receipt,
      publishedAt: 90,
      attempts: 3,
      lastError: null,
      leaseOwner: null,
      leaseExpiresAt: null,
      updatedAt: 100
    })
  })

  it("an absent patch field is left as it is; lastError null clears it, undefined keeps it", () => {
    const kept = CompareAndSet.decide(row("DISPATCHING"), request({ to: "PENDING", patch: { availableAt: 50 } })).next!
    assert.strictEqual(kept.lastError, "earlier")
    assert.strictEqual(kept.attempts, 2)
    assert.strictEqual(kept.availableAt, 50)
    const cleared = CompareAndSet.decide(row("DISPATCHING"), request({ to: "PENDING", patch: { lastError: null } }))
      .next!
    assert.isNull(cleared.lastError)
  })

  it("the lease owner must match when the request names one", () => {
    const stale = CompareAndSet.decide(row("DISPATCHING", "relay#2"), request({ leaseOwner: "relay#1" }))
    assert.deepStrictEqual(stale.outcome, { id, outcome: "rejected", current: "DISPATCHING" })
    assert.isUndefined(stale.next)
    const own = CompareAndSet.decide(row("DISPATCHING", "relay#1"), request({ leaseOwner: "relay#1" }))
    assert.strictEqual(own.outcome.outcome, "applied")
  })

  it("towards DISPATCHING a lease patch sets the lease, and no patch keeps it", () => {
    const set = CompareAndSet.decide(
      row("PENDING"),
      request({ from: ["PENDING"], to: "DISPATCHING", patch: { lease: { owner: "r#9", expiresAt: 900 } } })
    ).next!
    assert.deepStrictEqual([set.leaseOwner, set.leaseExpiresAt], ["r#9", 900])
    const kept = CompareAndSet.decide(row("DISPATCHING"), request({ from: ["DISPATCHING"], to: "DISPATCHING" })).next!
    assert.deepStrictEqual([kept.leaseOwner, kept.leaseExpiresAt], ["relay#1", 500])
    const cleared = CompareAndSet.decide(
      row("DISPATCHING"),
      request({ from: ["DISPATCHING"], to: "DISPATCHING", patch: { lease: null } })
    ).next!
    assert.deepStrictEqual([cleared.leaseOwner, cleared.leaseExpiresAt], [null, null])
  })

  it("already advanced (R2.6): the status stays, only receipt and publishedAt are recorded", () => {
    const accept = request({
      acceptIfIn: Lifecycle.advancedBeyond.PUBLISHED,
      patch: { receipt, publishedAt: 90, attempts: 9 }
    })
    const { next, outcome } = CompareAndSet.decide(row("UNDER_PROCESSING"), accept)
    assert.deepStrictEqual(outcome, { id, outcome: "already_advanced", current: "UNDER_PROCESSING" })
    assert.deepStrictEqual(next, { ...row("UNDER_PROCESSING"), receipt, publishedAt: 90 })
  })

  it("already advanced with nothing to record writes nothing", () => {
    const accept = request({ from: ["UNDER_PROCESSING"], to: "SUCCESS", acceptIfIn: ["SUCCESS", "PUSHED_FAILURE"] })
    const { next, outcome } = CompareAndSet.decide(row("SUCCESS"), accept)
    assert.deepStrictEqual(outcome, { id, outcome: "already_advanced", current: "SUCCESS" })
    assert.isUndefined(next)
  })

  describe("every status against a DISPATCHING -> PUBLISHED request that accepts later statuses", () => {
    const accept = request({ acceptIfIn: Lifecycle.advancedBeyond.PUBLISHED, patch: { receipt } })
    const expected: Record<Status, "applied" | "already_advanced" | "rejected"> = {
      PREQUEUED: "rejected",
      PENDING: "rejected",
      DISPATCHING: "applied",
      PUBLISHED: "rejected",
      UNDER_PROCESSING: "already_advanced",
      SUCCESS: "already_advanced",
      PUSHED_FAILURE: "already_advanced",
      FAILURE: "rejected",
      SKIPPED: "rejected"
    }
    for (const status of Lifecycle.statuses) {
      it(`${status}: ${expected[status]}`, () => {
        const { next, outcome } = CompareAndSet.decide(row(status), accept)
        assert.strictEqual(outcome.outcome, expected[status])
        assert.strictEqual(outcome.current, expected[status] === "applied" ? "PUBLISHED" : status)
        if (expected[status] === "rejected") assert.isUndefined(next)
      })
    }
  })

  it.effect.prop(
    "an applied move keeps a lease only towards DISPATCHING; anything else leaves the row unmoved",
    [Lifecycle.OutboxStatus, Lifecycle.OutboxStatus, Lifecycle.OutboxStatus],
    ([current, from, to]) =>
      Effect.sync(() => {
        const { next, outcome } = CompareAndSet.decide(row(current, "relay#1"), request({ from: [from], to }))
        if (current === from) {
          assert.strictEqual(outcome.outcome, "applied")
          assert.strictEqual(next!.status, to)
          assert.strictEqual(next!.leaseOwner !== null, Lifecycle.holdsLease(to))
        } else {
          assert.strictEqual(outcome.outcome, "rejected")
          assert.strictEqual(outcome.current, current)
          assert.isUndefined(next)
        }
      })
  )
})
