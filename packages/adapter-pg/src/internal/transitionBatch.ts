import * as PgTypes from "@effect/sql-pg/PgTypes"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { isEventId } from "@effect-outbox/core/OutboxMessage"
import type { TransitionOutcome, TransitionRequest } from "@effect-outbox/core/OutboxStore"
import * as Effect from "effect/Effect"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Tables } from "../PgTables.ts"
import { typedArray } from "./params.ts"
import { encodeRequest, fastStatement, genericStatement, type Uniform, uniform } from "./transition.ts"

type Row = { readonly outcome: TransitionOutcome["outcome"]; readonly current: OutboxStatus | null }
type Round = ReadonlyArray<readonly [TransitionRequest, number]>

/** Splits a batch into rounds of distinct ids, so a repeated id is applied after the first. */
const rounds = (requests: ReadonlyArray<TransitionRequest>) => {
  const out: Array<Array<readonly [TransitionRequest, number]>> = []
  const placed = new Map<string, number>()
  requests.forEach((request, index) => {
    const round = (placed.get(request.id) ?? -1) + 1
    placed.set(request.id, round)
    if (out[round] === undefined) out[round] = []
    out[round].push([request, index])
  })
  return out
}

// Anything the typed arrays cannot carry (not an event id, a partition outside int4) goes to
// the generic statement, which fails it as a typed error.
const fastEncodable = (r: TransitionRequest) =>
  isEventId(r.id) &&
  (r.patch.receipt === undefined ||
    (Number.isInteger(r.patch.receipt.partition) &&
      r.patch.receipt.partition >= -2147483648 &&
      r.patch.receipt.partition <= 2147483647))

/**
 * The batched compare-and-set of `OutboxStore.transition`: the batch in rounds of distinct ids,
 * each round one statement, outcomes in request order. A uniform round (the relay's mark) runs a
 * plain `UPDATE` over typed arrays for the rows that match and the generic statement only for
 * the rest (already advanced, rejected, missing).
 */
export const makeTransition = (sql: SqlClient.SqlClient, t: Tables, recordTransitions: boolean) => {
  const genericSql = genericStatement(t, recordTransitions)
  const fastSql = fastStatement(t, recordTransitions)

  // Any round: one statement, outcomes decided per row.
  const generic = (round: Round) =>
    sql
      .unsafe<{ idx: number } & Row>(genericSql, [
        PgTypes.jsonb(round.map(([request], idx) => encodeRequest(request, idx)))
      ])
      .withoutTransform.pipe(Effect.map((rows) => rows.map((row) => [round[row.idx]![1], row] as const)))

  // `ids` are the round's ids lower-cased (PostgreSQL's uuid text), computed once per round.
  const fast = (round: Round, ids: ReadonlyArray<string>, shape: Uniform) => {
    const order = round.map((_, i) => i).sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1))
    const partitions = new Array<number | null>(order.length)
    const offsets = new Array<string | null>(order.length)
    const sortedIds = new Array<string>(order.length)
    for (let j = 0; j < order.length; j++) {
      const r = round[order[j]!]![0]
      sortedIds[j] = r.id
      partitions[j] = r.patch.receipt?.partition ?? null
      offsets[j] = r.patch.receipt?.offset ?? null
    }
    return sql.unsafe<{ id: string }>(fastSql, [
      typedArray(sortedIds, PgTypes.OID.uuid),
      typedArray(partitions, PgTypes.OID.int4),
      typedArray(offsets, PgTypes.OID.text),
      PgTypes.text(shape.from),
      PgTypes.text(shape.to),
      PgTypes.text(shape.leaseOwner),
      PgTypes.float8(shape.now),
      PgTypes.float8(shape.publishedAt),
      PgTypes.bool(shape.setLastError),
      PgTypes.text(shape.lastError)
    ]).withoutTransform
  }

  const transitionRound = (round: Round) => {
    const requests = round.map(([request]) => request)
    const shape = uniform(requests)
    if (shape === undefined || !requests.every(fastEncodable)) return generic(round)
    const ids = requests.map((r) => r.id.toLowerCase())
    return Effect.flatMap(fast(round, ids, shape), (moved) => {
      const done = new Set<string>()
      for (const row of moved) done.add(row.id.toLowerCase())
      const applied: Array<readonly [number, Row]> = []
      const rest: Array<readonly [TransitionRequest, number]> = []
      const movedRow: Row = { outcome: "applied", current: shape.to }
      for (let i = 0; i < round.length; i++) {
        if (done.has(ids[i]!)) applied.push([round[i]![1], movedRow])
        else rest.push(round[i]!)
      }
      return rest.length === 0 ? Effect.succeed(applied) : Effect.map(generic(rest), (rows) => [...applied, ...rows])
    })
  }

  return (requests: ReadonlyArray<TransitionRequest>): Effect.Effect<ReadonlyArray<TransitionOutcome>, SqlError> =>
    Effect.forEach(rounds(requests), transitionRound, { concurrency: 1 }).pipe(
      Effect.map((results) => {
        const out: Array<TransitionOutcome> = new Array(requests.length)
        for (const [index, row] of results.flat()) {
          out[index] = { id: requests[index]!.id, outcome: row.outcome, current: row.current ?? undefined }
        }
        return out
      })
    )
}
