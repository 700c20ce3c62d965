/**
 * `OutboxStore` cases: `purge` and retention.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { newMessages, T0 } from "../../conformance.ts"
import { type Case, claimRequest, ids } from "./support.ts"

export const purgeSkipsLockedRows: Case = {
  name: "purge neither waits for nor deletes a row another open transaction is changing",
  requires: "isolation",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const transactor = yield* Transactor
      const messages = yield* newMessages([{ key: "a" }, { key: "b" }])
      yield* store.insert(messages)
      yield* store.claim(claimRequest())
      for (const m of messages) {
        yield* store.transition([{ id: m.id, from: ["DISPATCHING"], to: "PUBLISHED", patch: {}, now: T0 + 10 }])
      }
      const locked = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      const consumer = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.transition([
              {
                id: messages[0]!.id,
                from: ["PUBLISHED"],
                to: "UNDER_PROCESSING",
                patch: {},
                now: T0 + 20
              }
            ])
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(finish)
          })
        )
      )
      yield* Deferred.await(locked)
      const purged = yield* store
        .purge({ statuses: ["PUBLISHED"], olderThan: T0 + 100, limit: 10 })
        .pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(purged, 1)
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(consumer)
      const left = yield* store.list({ limit: 10 })
      assert.deepStrictEqual(
        left.map((row) => [row.id, row.status]),
        [[messages[0]!.id, "UNDER_PROCESSING"]]
      )
    })
}

export const purgeHonoursLimit: Case = {
  name: "purge deletes at most `limit` finished rows last updated before the cut-off",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const messages = yield* newMessages(Array.from({ length: 5 }, (_, i) => ({ key: `k${i}` })))
      yield* store.insert(messages)
      yield* store.claim(claimRequest())
      const finish = (m: NewOutboxMessage, to: OutboxStatus, now: number) =>
        store.transition([{ id: m.id, from: ["DISPATCHING"], to, patch: {}, now }])
      yield* finish(messages[0]!, "PUBLISHED", T0 + 10)
      yield* finish(messages[1]!, "PUBLISHED", T0 + 20)
      yield* finish(messages[2]!, "FAILURE", T0 + 30)
      yield* finish(messages[3]!, "PUBLISHED", T0 + 500)
      // messages[4] stays DISPATCHING.
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 2)
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 1)
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "FAILURE"], olderThan: T0 + 100, limit: 2 }), 0)
      const left: ReadonlyArray<OutboxMessage> = yield* store.list({ limit: 10 })
      assert.deepStrictEqual(ids(left), [messages[3]!.id, messages[4]!.id])
    })
}

export const retentionDrainsBacklog: Case = {
  name: "retention purges a backlog larger than one batch in one round, batch after batch",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const backlog = 1_250
      const messages = yield* newMessages(Array.from({ length: backlog + 1 }, (_, i) => ({ key: `k${i}` })))
      yield* store.insert(messages)
      yield* store.claim(claimRequest({ limit: backlog + 1 }))
      yield* store.transition(
        messages.slice(0, backlog).map((m) => ({
          id: m.id,
          from: ["DISPATCHING"] as const,
          to: "PUBLISHED" as const,
          patch: {},
          now: T0 + 10
        }))
      )
      const purged = yield* Retention.runOnce({ olderThan: Duration.zero, batchSize: 100, maxBatchesPerRound: 100 })
      assert.strictEqual(purged, backlog)
      const left = yield* store.list({ limit: 10 })
      assert.deepStrictEqual(ids(left), [messages[backlog]!.id], "only the DISPATCHING row is left")
    })
}
