/**
 * `InboxStore` cases: the deduplication window. Records are kept by their time and forgotten a
 * whole span (one day by default) at a time; a key older than what is still remembered is
 * `"expired"` and nothing is written.
 *
 * Times are relative to the wall clock: a PostgreSQL store creates its spans around the
 * database's clock.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { InboxStore, type ProcessedKey } from "@effect-outbox/core/InboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { type Case, key } from "./support.ts"

const DAY = 24 * 60 * 60 * 1000
const at = (identity: string, eventTime: number): ProcessedKey => ({ ...key(identity), eventTime })

export const purgeForgetsWholeSpans: Case = {
  name: "purge forgets whole spans that ended by the cut-off; their keys are expired from then on",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const now = Date.now()
      // Ten days old, today, and a day and a half ahead (a producer whose clock runs fast).
      const [old, today, ahead] = [
        at("event:old", now - 10 * DAY),
        at("event:today", now),
        at("event:ahead", now + 1.5 * DAY)
      ]
      assert.deepStrictEqual(yield* inbox.recordBatch([old, today, ahead], now), ["recorded", "recorded", "recorded"])
      assert.strictEqual(yield* inbox.horizon, Number.NEGATIVE_INFINITY)

      // Today's span ends before the cut-off; the span holding `ahead` does not.
      const cutOff = now + DAY
      assert.strictEqual(yield* inbox.purge(cutOff, 1), 2)
      const horizon = yield* inbox.horizon
      assert.isAtMost(horizon, cutOff)
      assert.isAbove(horizon, now)
      assert.deepStrictEqual(yield* Effect.forEach([old, today, ahead], (k) => inbox.exists(k)), [false, false, true])

      // Forgotten keys cannot be told from new ones: refused, and nothing is written.
      assert.strictEqual(yield* inbox.record(today, now), "expired")
      assert.deepStrictEqual(yield* inbox.recordBatch([old, ahead, at("event:later", now + 1.5 * DAY)], now), [
        "expired",
        "duplicate",
        "recorded"
      ])
      assert.isFalse(yield* inbox.exists(today))
      // A second round has nothing left to forget.
      assert.strictEqual(yield* inbox.purge(cutOff, 1), 0)
    })
}

export const uuidIdentityCarriesItsTime: Case = {
  name: "a UUIDv7 event identity is kept at its event's time, whatever the time of recording",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const now = Date.now()
      const hex = (now - 10 * DAY).toString(16).padStart(12, "0")
      const identity = `event:${hex.slice(0, 8)}-${hex.slice(8)}-7abc-8def-0123456789ab`
      assert.strictEqual(yield* inbox.record(key(identity), now), "recorded")
      // Recorded again later: the same key (same time), so a duplicate.
      assert.strictEqual(yield* inbox.record(key(identity), now + DAY), "duplicate")
      // Its span ended by now (PostgreSQL: in the partition of everything before its first day).
      assert.strictEqual(yield* inbox.purge(now, 1000), 1)
      assert.strictEqual(yield* inbox.record(key(identity), now), "expired")
    })
}

export const retentionForgetsInOneRound: Case = {
  name: "inbox retention forgets a backlog larger than one batch in one round, by whole spans",
  run: () =>
    Effect.gen(function* () {
      const inbox = yield* InboxStore
      const now = Date.now()
      const backlog = 1_250
      const keys = Array.from({ length: backlog }, (_, i) => at(`event:old-${i}`, now - 10 * DAY))
      for (let i = 0; i < backlog; i += 500) yield* inbox.recordBatch(keys.slice(i, i + 500), now)
      yield* inbox.record(at("event:young", now), now)
      // Nothing younger than now: the spans that ended by now go, today's stays.
      const round = yield* Retention.runInboxOnce(Duration.zero, { batchSize: 100, maxBatchesPerRound: 100 })
      assert.deepStrictEqual(round, { deleted: backlog, behind: false })
      assert.isFalse(yield* inbox.exists(keys[backlog - 1]!))
      assert.isTrue(yield* inbox.exists(key("event:young")))
    })
}
