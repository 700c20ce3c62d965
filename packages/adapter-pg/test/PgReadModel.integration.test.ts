// The operators' read model on the real PostgreSQL: what the CLI and the dashboard show, read
// from rows put in place through the store's own port (a fresh schema per test).
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { eventIdentity } from "@effect-outbox/core/Inbox"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import type { EventId, NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { ReadModel } from "@effect-outbox/core/ReadModel"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgReadModel from "../src/PgReadModel.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000

const Live = Layer.mergeAll(
  PgOutboxStore.layer({ recordTransitions: true }),
  PgInboxStore.layer,
  PgReadModel.layer
).pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient()))

const row = (topic: string, overrides: Partial<NewOutboxMessage> = {}): NewOutboxMessage => ({
  id: randomUUID() as EventId,
  topic,
  key: "k",
  partition: null,
  headers: {},
  payload: new Uint8Array([1]),
  status: "PENDING",
  availableAt: T0,
  createdAt: T0,
  ...overrides
})

const move = (id: EventId, from: "PENDING" | "DISPATCHING", to: "DISPATCHING" | "FAILURE" | "PUBLISHED", at: number) =>
  ({
    id,
    from: [from],
    to,
    patch: to === "FAILURE" ? { lastError: "broker said no", attempts: 3 } : {},
    now: at
  }) as const

describe("PgReadModel", () => {
  it.effect("counts per topic and status, recent failures newest first, history and who processed", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const inbox = yield* InboxStore
      const readModel = yield* ReadModel
      const [a, b, c] = [row("orders"), row("orders", { key: "k2" }), row("billing", { key: "k3" })]
      yield* store.insert([a, b, c])
      yield* store.transition([
        move(a.id, "PENDING", "DISPATCHING", T0 + 1),
        move(b.id, "PENDING", "DISPATCHING", T0 + 1)
      ])
      yield* store.transition([
        move(a.id, "DISPATCHING", "FAILURE", T0 + 2),
        move(b.id, "DISPATCHING", "PUBLISHED", T0 + 3)
      ])
      yield* inbox.record({ consumer: "billing", identity: eventIdentity(b.id) }, T0 + 4)

      const topics = yield* readModel.perTopic
      assert.deepStrictEqual(
        topics.map((t) => [t.topic, t.byStatus]),
        [
          ["billing", { PENDING: 1 }],
          ["orders", { FAILURE: 1, PUBLISHED: 1 }]
        ]
      )
      assert.strictEqual(topics[0]!.oldestPendingCreatedAt, T0)
      assert.strictEqual(topics[1]!.oldestPendingCreatedAt, null)

      const failures = yield* readModel.recentFailures(undefined, 10)
      assert.deepStrictEqual(
        failures.map((f) => [f.id, f.topic, f.attempts, f.lastError]),
        [[a.id, "orders", 3, "broker said no"]]
      )
      assert.deepStrictEqual(yield* readModel.recentFailures("billing", 10), [])

      assert.deepStrictEqual(
        (yield* readModel.history(b.id)).map((h) => [h.from, h.to, h.at]),
        [
          ["PENDING", "DISPATCHING", T0 + 1],
          ["DISPATCHING", "PUBLISHED", T0 + 3]
        ]
      )
      assert.deepStrictEqual(yield* readModel.history("not-an-id"), [])
      assert.deepStrictEqual(
        (yield* readModel.processedBy(b.id)).map((p) => [p.consumer, p.processedAt]),
        [["billing", T0 + 4]]
      )
    }).pipe(Effect.provide(Live))
  )

  it.effect("countPurgeable counts exactly what purge then deletes", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const readModel = yield* ReadModel
      const rows = [row("orders"), row("orders", { key: "k2" }), row("orders", { key: "k3" })]
      yield* store.insert(rows)
      for (const [i, r] of rows.entries()) {
        yield* store.transition([move(r.id, "PENDING", "DISPATCHING", T0 + 10 + i)])
        yield* store.transition([move(r.id, "DISPATCHING", "PUBLISHED", T0 + 10 + i)])
      }
      const cut = T0 + 12 // the first two were last updated before it
      assert.strictEqual(yield* readModel.countPurgeable(["PUBLISHED", "SUCCESS"], cut), 2)
      assert.strictEqual(yield* readModel.countPurgeable(["FAILURE"], cut), 0)
      assert.strictEqual(yield* store.purge({ statuses: ["PUBLISHED", "SUCCESS"], olderThan: cut, limit: 100 }), 2)
      assert.strictEqual(yield* readModel.countPurgeable(["PUBLISHED", "SUCCESS"], cut), 0)
    }).pipe(Effect.provide(Live))
  )

  it.effect("tables missing in the schema fail typed, naming what to check", () =>
    Effect.gen(function* () {
      const tables = yield* PgTables.make({ schema: "no_such_outbox_schema" })
      const readModel = yield* PgReadModel.make.pipe(Effect.provideService(PgTables.PgTables, tables))
      const error = yield* Effect.flip(readModel.perTopic)
      assert.strictEqual(error._tag, "StoreError")
      assert.match(error.reason, /migrated in schema "no_such_outbox_schema"/)
    }).pipe(Effect.provide(pgClient()))
  )
})
