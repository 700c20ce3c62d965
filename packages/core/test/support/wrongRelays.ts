// Deliberately wrong relays: each breaks one ordering rule, so the simulation's checker must
// report a violation. They use the same transition helper as the real relay (only the algorithm
// is wrong), so the store history stays legal and only ordering can be blamed.

import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { OutboxMessage } from "../../src/OutboxMessage.ts"
import { OutboxStore } from "../../src/OutboxStore.ts"
import { Publisher } from "../../src/Publisher.ts"
import * as Transition from "../../src/Transition.ts"
import type { RelayLoop } from "./simulation.ts"

const loop = (once: Effect.Effect<unknown, unknown, OutboxStore | Publisher>) =>
  once.pipe(Effect.ignore, Effect.andThen(Effect.sleep(Duration.millis(100))), Effect.forever)

const request = (row: OutboxMessage) => ({
  id: row.id,
  topic: row.topic,
  key: row.key,
  partition: row.partition,
  headers: row.headers,
  payload: row.payload
})

/** Publishes each claimed batch in reverse order. */
export const reversedRelay: RelayLoop = (owner, settings) =>
  loop(
    Effect.gen(function* () {
      const rows = yield* Transition.claim({
        owner,
        limit: settings.batchSize ?? 10,
        maxPerKey: 10,
        leaseMillis: 1_000
      })
      if (rows.length === 0) return
      const reversed = [...rows].reverse()
      const outcomes = yield* (yield* Publisher).publish(reversed.map(request))
      const published = reversed.flatMap((row, i) => {
        const outcome = outcomes[i]!
        return Result.isSuccess(outcome) ? [{ id: row.id, receipt: outcome.success }] : []
      })
      const now = yield* Clock.currentTimeMillis
      const failed = reversed.flatMap((row, i) =>
        Result.isFailure(outcomes[i]!)
          ? [{ id: row.id, owner, reason: "failed", attempts: row.attempts + 1, retryAt: now + 50 }]
          : []
      )
      yield* Transition.settle({ published, failed, released: [] })
    })
  )

/**
 * Sends every record on its own and settles each one independently: a failed record of a key
 * does not hold back the later ones, which get published (and marked) ahead of it.
 */
export const independentSendsRelay: RelayLoop = (owner, settings) =>
  loop(
    Effect.gen(function* () {
      const rows = yield* Transition.claim({
        owner,
        limit: settings.batchSize ?? 10,
        maxPerKey: 10,
        leaseMillis: 1_000
      })
      const publisher = yield* Publisher
      for (const row of rows) {
        const [outcome] = yield* publisher.publish([request(row)])
        const now = yield* Clock.currentTimeMillis
        if (Result.isSuccess(outcome!)) yield* Transition.markPublished([{ id: row.id, receipt: outcome.success }])
        else {
          yield* Transition.markPublishFailed([
            { id: row.id, owner, reason: "failed", attempts: row.attempts + 1, retryAt: now + 50 }
          ])
        }
      }
    })
  )

/** Claims the newest PENDING row, ignoring the per-key rule (no key lock). */
export const noKeyLockRelay: RelayLoop = (owner) =>
  loop(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const now = yield* Clock.currentTimeMillis
      const pending = (yield* store.list({ statuses: ["PENDING"], limit: 1_000 })).filter(
        (row) => row.availableAt <= now
      )
      const newest = [...pending].sort((a, b) => b.seq - a.seq)[0]
      if (newest === undefined) return
      const [claimed] = yield* Transition.apply([
        {
          id: newest.id,
          from: ["PENDING"],
          to: "DISPATCHING",
          patch: { lease: { owner, expiresAt: now + 1_000 } }
        }
      ])
      if (claimed?.outcome !== "applied") return
      const [outcome] = yield* (yield* Publisher).publish([request(newest)])
      if (Result.isSuccess(outcome!)) yield* Transition.markPublished([{ id: newest.id, receipt: outcome.success }])
      else {
        yield* Transition.markPublishFailed([
          { id: newest.id, owner, reason: "failed", attempts: newest.attempts + 1, retryAt: now + 50 }
        ])
      }
    })
  )
