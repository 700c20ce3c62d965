// The transition fast path (a uniform round, e.g. the relay's mark, as a plain UPDATE over typed
// arrays) must be indistinguishable from the generic statement: the same scenario runs once
// through the store and once with every round forced through the generic statement, in twin
// schemas, and outcomes, rows and history must match exactly.

import { randomUUID } from "node:crypto"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import { assert, describe, it } from "@effect/vitest"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, NewOutboxMessage, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type { OutboxStore, TransitionOutcome, TransitionRequest } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import { encodeRequest, genericStatement, uniform } from "../src/internal/transition.ts"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const T0 = 1_764_000_000_000
const advanced = ["UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE"] as const

const ids = Array.from({ length: 9 }, () => randomUUID() as EventId)
const missing = randomUUID() as EventId

const draft = (id: EventId, status: "PENDING" | "PREQUEUED" = "PENDING"): NewOutboxMessage => ({
  id,
  topic: "orders",
  key: null,
  partition: null,
  headers: {},
  payload: new Uint8Array([7]),
  status,
  availableAt: T0,
  createdAt: T0
})

const published = (id: EventId, i: number, owner?: string): TransitionRequest => ({
  id,
  from: ["DISPATCHING"],
  to: "PUBLISHED",
  acceptIfIn: advanced,
  ...(owner === undefined ? {} : { leaseOwner: owner }),
  now: T0 + 100,
  patch: {
    receipt: { topic: "orders", partition: i % 3, offset: String(1000 + i) },
    publishedAt: T0 + 100,
    lease: null,
    lastError: null
  }
})

/** Same rows, same moves: some applied, some already advanced, some rejected, one missing. */
const scenario = (store: OutboxStore["Service"]) =>
  Effect.gen(function* () {
    yield* store.insert(ids.slice(0, 8).map((id) => draft(id)))
    yield* store.insert([draft(ids[8]!, "PREQUEUED")])
    yield* store.claim({ owner: "relay-a", limit: 6, maxPerKey: 10, leaseMillis: 30_000, now: T0 + 10 })
    yield* store.claim({ owner: "relay-b", limit: 1, maxPerKey: 10, leaseMillis: 30_000, now: T0 + 10 })
    // ids[3] ran ahead to UNDER_PROCESSING, ids[4] was already marked, ids[5] failed.
    yield* store.transition([{ id: ids[3]!, from: ["DISPATCHING"], to: "UNDER_PROCESSING", now: T0 + 20, patch: {} }])
    yield* store.transition([{ id: ids[4]!, from: ["DISPATCHING"], to: "PUBLISHED", now: T0 + 20, patch: {} }])
    yield* store.transition([
      { id: ids[5]!, from: ["DISPATCHING"], to: "FAILURE", now: T0 + 20, patch: { lastError: "x" } }
    ])
    const outcomes: Array<ReadonlyArray<TransitionOutcome>> = []
    // The relay's mark: one uniform round over every kind of row.
    outcomes.push(yield* store.transition([...ids, missing].map((id, i) => published(id, i))))
    // A mark conditional on a lease owner (relay-c holds ids[7] and a new row; ids[6] moved on).
    yield* store.insert([draft(randomUUID() as EventId)])
    const next = yield* store.claim({ owner: "relay-c", limit: 10, maxPerKey: 10, leaseMillis: 30_000, now: T0 + 200 })
    const fresh = next.filter((m) => m.id !== ids[7]).map((m) => m.id)
    outcomes.push(yield* store.transition([ids[6]!, ...fresh].map((id, i) => published(id, i, "relay-c"))))
    // Releases on shutdown (uniform: one reason): the wrong owner is refused, the right one applies.
    const release = (owner: string) =>
      store.transition([
        {
          id: ids[7]!,
          from: ["DISPATCHING"],
          to: "PENDING",
          leaseOwner: owner,
          now: T0 + 300,
          patch: { lease: null, lastError: "relay shut down" }
        }
      ])
    outcomes.push(yield* release("relay-b"))
    outcomes.push(yield* release("relay-c"))
    const rows: Array<Omit<OutboxMessage, "id" | "seq">> = []
    for (const id of [...ids, ...fresh]) {
      const { id: _id, seq: _seq, ...rest } = Option.getOrThrow(yield* store.get(id))
      rows.push(rest)
    }
    return { outcomes: outcomes.map((round) => round.map((o) => ({ ...o, id: ids.indexOf(o.id) }))), rows }
  })

const history = (t: PgTables.Tables) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql
      .unsafe<{ event: number; from_status: string; to_status: string; lease_owner: string | null; at: Date }>(
        `SELECT event_id::text AS event, from_status, to_status, lease_owner, at FROM ${t.transition} ORDER BY id`
      )
      .withoutTransform.pipe(
        // one statement appends its rows in no particular order: compare as a set, per event in time order
        Effect.map((rows) =>
          rows
            .map((r) => ({ ...r, event: ids.indexOf(r.event as never) }))
            .sort((a, b) => a.event - b.event || a.at.getTime() - b.at.getTime())
        )
      )
  )

const twin = (forceGeneric: boolean) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables.make({ schema: freshSchema() })
    yield* Effect.addFinalizer(() =>
      sql.unsafe(`DROP SCHEMA IF EXISTS "${t.schema}" CASCADE`).unprepared.pipe(Effect.ignore)
    )
    yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, t))
    const store = yield* PgOutboxStore.make({ recordTransitions: true }).pipe(
      Effect.provideService(PgTables.PgTables, t)
    )
    if (!forceGeneric) return { t, store }
    const statement = genericStatement(t, true)
    const transition: OutboxStore["Service"]["transition"] = (requests) =>
      Effect.forEach(requests, (request) =>
        sql
          .unsafe<{ outcome: TransitionOutcome["outcome"]; current: OutboxStatus | null }>(statement, [
            PgTypes.jsonb([encodeRequest(request, 0)])
          ])
          .withoutTransform.pipe(
            Effect.map(([row]) => ({ id: request.id, outcome: row!.outcome, current: row!.current ?? undefined }))
          )
      ).pipe(Effect.orDie)
    return { t, store: { ...store, transition } }
  })

describe("PgOutboxStore.transition fast path", () => {
  it("uniform rounds are recognised; anything else is not", () => {
    const mark = [published(ids[0]!, 0), published(ids[1]!, 1)]
    assert.isDefined(uniform(mark))
    assert.isUndefined(uniform([published(ids[0]!, 0), { ...published(ids[1]!, 1), now: T0 + 101 }]))
    assert.isUndefined(uniform([published(ids[0]!, 0), published(ids[1]!, 1, "relay-a")]))
    assert.isUndefined(uniform([{ ...published(ids[0]!, 0), from: ["DISPATCHING", "PUBLISHED"] }]))
    assert.isUndefined(uniform([{ ...published(ids[0]!, 0), patch: { attempts: 1 } }]))
    assert.isUndefined(uniform([{ ...published(ids[0]!, 0), to: "DISPATCHING", patch: {} }]))
    assert.isUndefined(
      uniform([
        { ...published(ids[0]!, 0), patch: { lastError: "a" } },
        { ...published(ids[1]!, 0), patch: { lastError: "b" } }
      ])
    )
  })

  it.effect("outcomes, rows and history match the generic statement exactly", () =>
    Effect.gen(function* () {
      const fast = yield* twin(false)
      const generic = yield* twin(true)
      const a = yield* scenario(fast.store)
      const b = yield* scenario(generic.store)
      assert.deepStrictEqual(a.outcomes, b.outcomes)
      assert.deepStrictEqual(a.rows, b.rows)
      assert.deepStrictEqual(yield* history(fast.t), yield* history(generic.t))
      // and the scenario covers what it claims to
      assert.deepStrictEqual(
        a.outcomes[0]!.map((o) => [o.outcome, o.current]),
        [
          ["applied", "PUBLISHED"],
          ["applied", "PUBLISHED"],
          ["applied", "PUBLISHED"],
          ["already_advanced", "UNDER_PROCESSING"],
          ["rejected", "PUBLISHED"],
          ["rejected", "FAILURE"],
          ["applied", "PUBLISHED"],
          ["rejected", "PENDING"],
          ["rejected", "PREQUEUED"],
          ["rejected", undefined]
        ]
      )
      assert.deepStrictEqual(
        a.outcomes[1]!.map((o) => o.outcome),
        ["rejected", "applied"]
      )
      assert.deepStrictEqual(
        a.outcomes.slice(2).map((round) => [round[0]!.outcome, round[0]!.current]),
        [
          ["rejected", "DISPATCHING"],
          ["applied", "PENDING"]
        ]
      )
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
