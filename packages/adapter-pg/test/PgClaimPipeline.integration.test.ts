// The claim on PostgreSQL as a pipelined relay uses it: a relay's next claim runs while its
// earlier batch is still DISPATCHING. The per-key rule alone keeps them apart (a key with a
// DISPATCHING row is not claimed), and the key's next rows follow in order once the batch is
// marked. And the claim's candidate scan, which reads the oldest rows first, still fills a batch
// when those rows belong to a few keys, or to keys whose head waits.
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { EventId, NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000

const StoreLive = PgOutboxStore.layer().pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient(2)))

const pending = (key: string | null, n: number): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic: "t",
  key,
  partition: null,
  headers: {},
  payload: new TextEncoder().encode(`${key ?? "-"}:${n}`),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0
})

const texts = (batch: ReadonlyArray<OutboxMessage>) => batch.map((m) => new TextDecoder().decode(m.payload))

const claim = (owner: string, limit: number, maxPerKey: number) =>
  Effect.flatMap(OutboxStore, (store) => store.claim({ owner, limit, maxPerKey, leaseMillis: 60_000, now: T0 + 1 }))

const markPublished = (owner: string, batch: ReadonlyArray<OutboxMessage>) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
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
    assert.isTrue(outcomes.every((o) => o.outcome === "applied"))
  })

describe("PgOutboxStore claim under a pipelined relay", () => {
  it.effect(
    "a claim while an earlier batch is in flight takes none of its keys; they follow in order once it is marked",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const keys = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]
        // Interleaved: every key's first row, then every key's second row, then the third.
        yield* store.insert([1, 2, 3].flatMap((n) => keys.map((key) => pending(key, n))))

        const first = yield* claim("relay#1", 4, 1)
        assert.deepStrictEqual(texts(first), ["k0:1", "k1:1", "k2:1", "k3:1"])
        // Batch 1 is still DISPATCHING (being published): the next claim of the same relay skips
        // its keys, though their next rows are the oldest PENDING ones.
        const second = yield* claim("relay#2", 20, 20)
        assert.deepStrictEqual(texts(second).sort(), [
          "k4:1",
          "k4:2",
          "k4:3",
          "k5:1",
          "k5:2",
          "k5:3",
          "k6:1",
          "k6:2",
          "k6:3",
          "k7:1",
          "k7:2",
          "k7:3"
        ])
        assert.deepStrictEqual(yield* claim("relay#3", 20, 20), [], "every key is in flight")

        yield* markPublished("relay#1", first)
        const third = yield* claim("relay#4", 20, 20)
        assert.deepStrictEqual(texts(third), ["k0:2", "k1:2", "k2:2", "k3:2", "k0:3", "k1:3", "k2:3", "k3:3"])
        yield* markPublished("relay#2", second)
        yield* markPublished("relay#4", third)
        const stats = yield* store.stats(T0 + 3)
        assert.deepStrictEqual(stats.byStatus, { PUBLISHED: 24 })
      }).pipe(Effect.provide(StoreLive))
  )

  // 100 rows of one key ahead: found by the second step (up to 160 rows for a batch of 10); 300:
  // by the last (up to 1,200).
  for (const hot of [100, 300]) {
    it.effect(
      `when the oldest rows hold too few keys (${hot} rows of one key first), the claim reads on and fills the batch`,
      () =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          // A batch of 10 at one row per key finds one candidate among the hot key's rows.
          yield* store.insert([
            ...Array.from({ length: hot }, (_, i) => pending("hot", i + 1)),
            ...Array.from({ length: 12 }, (_, i) => pending(`u${i}`, 1)),
            pending(null, 1)
          ])
          const batch = yield* claim("relay#1", 10, 1)
          assert.deepStrictEqual(texts(batch), [
            "hot:1",
            "u0:1",
            "u1:1",
            "u2:1",
            "u3:1",
            "u4:1",
            "u5:1",
            "u6:1",
            "u7:1",
            "u8:1"
          ])
          // The rest, key-less row included, once the hot key is free again.
          yield* markPublished("relay#1", batch)
          const next = yield* claim("relay#2", 10, 1)
          assert.deepStrictEqual(texts(next), ["hot:2", "u9:1", "u10:1", "u11:1", "-:1"])
        }).pipe(Effect.provide(StoreLive))
    )
  }

  it.effect(
    "rows of keys whose head waits (2,000 of them, older than everything else) do not hide the keys behind them",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const waiting = Array.from({ length: 10 }, (_, i) => `w${i}`)
        // Each waiting key's head backs off until T0 + 10 s; its 200 younger rows arrived after.
        yield* store.insert(waiting.map((key) => ({ ...pending(key, 0), availableAt: T0 + 10_000 })))
        yield* store.insert(Array.from({ length: 200 }, (_, n) => waiting.map((key) => pending(key, n + 1))).flat())
        yield* store.insert([...Array.from({ length: 12 }, (_, i) => pending(`u${i}`, 1)), pending(null, 1)])
        const batch = yield* claim("relay#1", 10, 1)
        assert.deepStrictEqual(texts(batch), [
          "u0:1",
          "u1:1",
          "u2:1",
          "u3:1",
          "u4:1",
          "u5:1",
          "u6:1",
          "u7:1",
          "u8:1",
          "u9:1"
        ])
        const next = yield* claim("relay#2", 10, 1)
        assert.deepStrictEqual(texts(next), ["u10:1", "u11:1", "-:1"])
      }).pipe(Effect.provide(StoreLive))
  )
})
