// Several relays claiming from one table at once, on separate connections: a key is never in
// flight at two owners, and every key's rows are claimed exactly once, in seq order.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const KEYS = 40
const PER_KEY = 15
const UNKEYED = 60
const RELAYS = 8

const StoreLive = PgOutboxStore.layer().pipe(
  Layer.provideMerge(freshTables()),
  Layer.provideMerge(pgClient(RELAYS + 2))
)

describe("PgOutboxStore under concurrent relays", () => {
  it.live(
    "never hands one key to two owners; each key is claimed exactly once, in seq order",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const rows: Array<NewOutboxMessage> = []
        // interleave keys so that every claim sees many keys at once
        for (let i = 0; i < PER_KEY; i++) {
          for (let k = 0; k < KEYS; k++) {
            rows.push({
              id: randomUUID() as EventId,
              topic: "t",
              key: `user-${k}`,
              partition: null,
              headers: {},
              payload: new Uint8Array([i]),
              status: "PENDING",
              availableAt: T0,
              createdAt: T0
            })
          }
          for (let u = 0; u < UNKEYED / PER_KEY; u++) {
            rows.push({
              id: randomUUID() as EventId,
              topic: "t",
              key: null,
              partition: null,
              headers: {},
              payload: new Uint8Array([i]),
              status: "PENDING",
              availableAt: T0,
              createdAt: T0
            })
          }
        }
        yield* store.insert(rows)
        const seqOf = new Map((yield* store.list({ limit: 10_000 })).map((m) => [m.id, m.seq] as const))

        const inFlight = new Map<string, string>()
        const claimedSeqs = new Map<string, Array<number>>()
        const claimedIds = new Set<string>()
        const violations: Array<string> = []
        let emptyStreak = 0

        const relay = (owner: string) =>
          Effect.gen(function* () {
            while (claimedIds.size < rows.length && emptyStreak < 200) {
              const batch = yield* store.claim({ owner, limit: 12, maxPerKey: 3, leaseMillis: 60_000, now: T0 + 1 })
              if (batch.length === 0) {
                emptyStreak++
                yield* Effect.sleep("2 millis")
                continue
              }
              emptyStreak = 0
              const keys = new Set(batch.flatMap((m) => (m.key === null ? [] : [m.key])))
              for (const key of keys) {
                const holder = inFlight.get(key)
                if (holder !== undefined) violations.push(`${key} claimed by ${owner} while in flight at ${holder}`)
                inFlight.set(key, owner)
              }
              for (const m of batch) {
                if (claimedIds.has(m.id)) violations.push(`${m.id} claimed twice`)
                claimedIds.add(m.id)
                if (m.key !== null) claimedSeqs.set(m.key, [...(claimedSeqs.get(m.key) ?? []), m.seq])
              }
              yield* Effect.sleep(`${1 + Math.floor(Math.random() * 4)} millis`)
              for (const key of keys) inFlight.delete(key)
              const outcomes = yield* store.transition(
                batch.map((m) => ({
                  id: m.id,
                  from: ["DISPATCHING"],
                  to: "PUBLISHED",
                  leaseOwner: owner,
                  now: T0 + 2,
                  patch: { publishedAt: T0 + 2 }
                }))
              )
              if (outcomes.some((o) => o.outcome !== "applied")) violations.push(`${owner} lost a lease`)
            }
          })

        yield* Effect.forEach(
          Array.from({ length: RELAYS }, (_, i) => `relay-${i}`),
          relay,
          {
            concurrency: "unbounded",
            discard: true
          }
        )

        assert.deepStrictEqual(violations, [])
        assert.strictEqual(claimedIds.size, rows.length)
        for (let k = 0; k < KEYS; k++) {
          const seqs = claimedSeqs.get(`user-${k}`)!
          const expected = rows.filter((r) => r.key === `user-${k}`).map((r) => seqOf.get(r.id)!)
          assert.deepStrictEqual(seqs, expected, `user-${k} claimed out of order`)
        }
        const stats = yield* store.stats(T0 + 3)
        assert.deepStrictEqual(stats.byStatus, { PUBLISHED: rows.length })
      }).pipe(Effect.provide(StoreLive)),
    { timeout: 120_000 }
  )

  it.live(
    "recovery lease: rounds of eight recoverers racing for a free lease each get an answer, exactly one holds it",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        for (let round = 0; round < 30; round++) {
          const results = yield* Effect.forEach(
            Array.from({ length: RELAYS }, (_, i) => `recoverer-${round}-${i}`),
            (owner) => store.acquireRecoveryLease({ owner, ttlMillis: 60_000 }),
            { concurrency: "unbounded" }
          )
          const holders = results.filter((r) => r.acquired)
          assert.strictEqual(holders.length, 1, `round ${round}`)
          assert.isTrue(
            results.every((r) => r.owner === holders[0]!.owner),
            `round ${round}: every loser names the holder`
          )
          yield* store.releaseRecoveryLease(holders[0]!.owner)
        }
      }).pipe(Effect.provide(StoreLive))
  )
})
