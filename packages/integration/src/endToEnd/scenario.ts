/**
 * The end-to-end scenario's scale (E2E_EVENTS, keys) and its writes: events enqueued in
 * transactions beside a business row, some rolled back.
 *
 * @since 0.1.0
 */
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"

export const EVENTS = Number(process.env.E2E_EVENTS ?? (process.env.CI ? 10_000 : 2_000))
export const KEYS = 200
export const PER_TRANSACTION = 50
export const ROLLBACK_EVERY = 5

export const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

/** Enqueues `EVENTS` events on `topic`, transactions of 50; every fifth transaction rolls back. */
export const enqueueAll = (topic: string) =>
  Effect.gen(function* () {
    const committed = new Map<string, { key: string; seq: number }>()
    const rolledBack = new Set<string>()
    // When each committed event's transaction began (at the latest) and committed (at the
    // earliest we know), and its place in it: the order the library owes (docs/ordering.md).
    const placeOf = new Map<string, { tx: number; began: number; ended: number; index: number }>()
    const transactions = Math.ceil(EVENTS / PER_TRANSACTION)
    yield* Effect.forEach(
      Array.from({ length: transactions }, (_, t) => t),
      (t) =>
        Effect.gen(function* () {
          const drafts = Array.from({ length: PER_TRANSACTION }, (_, j) => {
            const i = t * PER_TRANSACTION + j
            const event = { key: `user-${i % KEYS}`, seq: Math.floor(i / KEYS) }
            return { topic, key: event.key, payload: jsonPayload(event) }
          })
          const ids: Array<string> = []
          const work = Effect.gen(function* () {
            ids.push(...(yield* Outbox.enqueue(drafts)))
            if (t % ROLLBACK_EVERY === ROLLBACK_EVERY - 1) return yield* Effect.fail("rolled back on purpose" as const)
          })
          const began = performance.now()
          const outcome = yield* Effect.result(Outbox.withTransaction(work))
          const ended = performance.now()
          drafts.forEach((d, j) => {
            const event = JSON.parse(text(d.payload)) as { key: string; seq: number }
            if (outcome._tag === "Success") {
              committed.set(ids[j]!, event)
              placeOf.set(ids[j]!, { tx: t, began, ended, index: j })
            } else rolledBack.add(ids[j]!)
          })
        }),
      { concurrency: 4, discard: true }
    )
    return { committed, rolledBack, placeOf }
  })

export type Place = { readonly tx: number; readonly began: number; readonly ended: number; readonly index: number }

/** The order the library owes between two events, and a check of a sequence against it. */
export const orderOf = (placeOf: ReadonlyMap<string, Place>) => {
  // Transactions run 4 at a time and share keys. Per key, `a` must come before `b` when both
  // are in one transaction in that order, or when `a`'s transaction committed before `b`'s
  // began; overlapping transactions have no order between them.
  const mustPrecede = (a: string, b: string) => {
    const pa = placeOf.get(a)!
    const pb = placeOf.get(b)!
    return pa.tx === pb.tx ? pa.index < pb.index : pa.ended < pb.began
  }
  const inOrder = (sequence: ReadonlyArray<string>) => {
    for (let i = 0; i < sequence.length; i++)
      for (let j = i + 1; j < sequence.length; j++)
        if (mustPrecede(sequence[j]!, sequence[i]!)) return `${sequence[j]} must precede ${sequence[i]}`
    return undefined
  }
  return { mustPrecede, inOrder }
}

/** Waits (up to 150 s) until `expected` distinct effects are applied and as many rows are SUCCESS. */
export const awaitApplied = (effects: string, expected: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const deadline = Date.now() + 150_000
    let applied = 0
    let successes = 0
    while (Date.now() < deadline) {
      applied = (yield* sql<{
        n: number
      }>`SELECT count(DISTINCT event_id)::int AS n FROM ${sql.literal(effects)}`)[0]!.n
      successes = (yield* store.stats(Date.now())).byStatus.SUCCESS ?? 0
      if (applied === expected && successes === expected) break
      yield* Effect.sleep("250 millis")
    }
    return { applied, successes }
  })
