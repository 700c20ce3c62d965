/**
 * `InboxStore` cases: `purge` and inbox retention.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { T0 } from "../../conformance.ts"
import { type Case, key } from "./support.ts"

export const purgeHonoursLimit: Case = {
  name: "purge deletes at most `limit` records older than the cut-off",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      for (const [i, at] of [T0 - 300, T0 - 200, T0 - 100, T0 + 100].entries()) {
        yield* inbox.record(key(`event:${i}`), at)
      }
      assert.strictEqual(yield* inbox.purge(T0, 2), 2)
      assert.strictEqual(yield* inbox.purge(T0, 2), 1)
      assert.strictEqual(yield* inbox.purge(T0, 2), 0)
      assert.isTrue(yield* inbox.exists(key("event:3")))
      const left = yield* Effect.forEach([0, 1, 2], (i) => inbox.exists(key(`event:${i}`)))
      assert.deepStrictEqual(left, [false, false, false])
      // A purged key may be recorded again.
      assert.strictEqual(yield* inbox.record(key("event:0"), T0 + 200), "recorded")
    })
}

export const retentionDrainsBacklog: Case = {
  name: "inbox retention purges a backlog larger than one batch in one round",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const backlog = 1_250
      const keys = Array.from({ length: backlog }, (_, i) => key(`event:old-${i}`))
      for (let i = 0; i < backlog; i += 500) yield* inbox.recordBatch(keys.slice(i, i + 500), T0)
      yield* inbox.record(key("event:young"), Date.now() + 60_000)
      const round = yield* Retention.runInboxOnce(Duration.zero, { batchSize: 100, maxBatchesPerRound: 100 })
      assert.deepStrictEqual(round, { deleted: backlog, behind: false })
      assert.isFalse(yield* inbox.exists(keys[backlog - 1]!))
      assert.isTrue(yield* inbox.exists(key("event:young")))
      // Bounded: a round stops at its cap and says it is behind.
      yield* inbox.recordBatch(keys.slice(0, 300), T0)
      const capped = yield* Retention.runInboxOnce(Duration.zero, { batchSize: 100, maxBatchesPerRound: 2 })
      assert.deepStrictEqual(capped, { deleted: 200, behind: true })
    })
}
