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

  const fast = (round: Round, shape: Uniform) => {
    const sorted = [...round].sort(([a], [b]) => (a.id.toLowerCase() < b.id.toLowerCase() ? -1 : 1))
    return sql.unsafe<{ id: string }>(fastSql, [
      typedArray(
        sorted.map(([r]) => r.id),
        PgTypes.OID.uuid
      ),
      typedArray(
        sorted.map(([r]) => r.patch.receipt?.partition ?? null),
        PgTypes.OID.int4
      ),
      typedArray(
        sorted.map(([r]) => r.patch.receipt?.offset ?? null),
        PgTypes.OID.text
      ),
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
    const shape = uniform(round.map(([request]) => request))
    if (shape === undefined || !round.every(([r]) => fastEncodable(r))) return generic(round)
    return Effect.flatMap(fast(round, shape), (moved) => {
      const done = new Set(moved.map((row) => row.id.toLowerCase()))
      const applied = round
        .filter(([r]) => done.has(r.id.toLowerCase()))
        .map(([, index]) => [index, { outcome: "applied", current: shape.to as OutboxStatus }] as const)
      const rest = round.filter(([r]) => !done.has(r.id.toLowerCase()))
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
