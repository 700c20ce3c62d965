/**
 * `OutboxStore` cases: `list` and `stats`, the read side operators and gauges use.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import { newMessages, T0 } from "../../conformance.ts"
import { type Case, claimRequest, ids } from "./support.ts"

export const listFilters: Case = {
  name: "list filters by status, topic, ids and creation time, in seq order, up to the limit",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([
        { topic: "x", createdAt: T0 - 300 },
        { topic: "y", createdAt: T0 - 200 },
        { topic: "x", createdAt: T0 - 100, status: "PREQUEUED" },
        { topic: "x", createdAt: T0 }
      ])
      yield* store.insert(messages)
      const all = messages.map((m) => m.id)
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, topic: "x" })), [all[0], all[2], all[3]])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, statuses: ["PREQUEUED"] })), [all[2]])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, createdBefore: T0 - 150 })), [all[0], all[1]])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, ids: [all[3]!, all[1]!] })), [all[1], all[3]])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 2 })), [all[0], all[1]])
    })
}

export const listByLastUpdate: Case = {
  name: "list filters by last update: the rows stuck in a status since before a time",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages([{ key: "a" }, { key: "b" }, { key: "c" }])
      yield* store.insert(messages)
      yield* store.claim(claimRequest())
      const start = (m: NewOutboxMessage, now: number) =>
        store.transition([{ id: m.id, from: ["DISPATCHING"], to: "UNDER_PROCESSING", patch: {}, now }])
      yield* start(messages[0]!, T0 + 10)
      yield* start(messages[1]!, T0 + 500)
      // messages[2] stays DISPATCHING (claimed at T0).
      const stuck = yield* store.list({ limit: 10, statuses: ["UNDER_PROCESSING"], updatedBefore: T0 + 100 })
      assert.deepStrictEqual(ids(stuck), [messages[0]!.id])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 + 100 })), [
        messages[0]!.id,
        messages[2]!.id
      ])
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 })), [])
      // Paging in seq order.
      const [first] = yield* store.list({ limit: 1, updatedBefore: T0 + 100 })
      assert.deepStrictEqual(ids(yield* store.list({ limit: 10, updatedBefore: T0 + 100, afterSeq: first!.seq })), [
        messages[2]!.id
      ])
    })
}

export const statsByStatus: Case = {
  name: "stats count rows by status and report the oldest pending creation time",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const empty = yield* store.stats(T0)
      assert.strictEqual(empty.oldestPendingCreatedAt, null)
      assert.strictEqual(empty.staleLeases, 0)
      const messages = yield* newMessages([
        { key: "a", createdAt: T0 - 50 },
        { key: "b", createdAt: T0 - 70 },
        { key: "c", createdAt: T0 - 10, status: "PREQUEUED" }
      ])
      yield* store.insert(messages)
      yield* store.claim(claimRequest({ limit: 1 }))
      const stats = yield* store.stats(T0)
      assert.strictEqual(stats.byStatus.PENDING, 1)
      assert.strictEqual(stats.byStatus.DISPATCHING, 1)
      assert.strictEqual(stats.byStatus.PREQUEUED, 1)
      assert.strictEqual(stats.byStatus.SUCCESS ?? 0, 0)
      assert.strictEqual(stats.oldestPendingCreatedAt, T0 - 70)
    })
}
