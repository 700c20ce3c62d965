/**
 * What the `OutboxStore` cases share: the services under test, the feature switches, and small
 * helpers over claims and rows.
 *
 * @internal
 */
import type { NewOutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { type ClaimRequest, OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { T0 } from "../../conformance.ts"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = OutboxStore | Transactor

/** The suite's feature switches (documented on `OutboxStoreSuite.Features`). */
export type Feature = "isolation" | "concurrentClaims"

export type Case = SuiteCase.Case<void, Services, Feature>

export const claimRequest = (overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  owner: "relay-a",
  limit: 100,
  maxPerKey: 100,
  leaseMillis: 30_000,
  now: T0,
  ...overrides
})

export const ids = (rows: ReadonlyArray<{ readonly id: string }>) => rows.map((row) => row.id)

/** A stored row, which must exist. */
export const rowOf = (id: NewOutboxMessage["id"]) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    return Option.getOrThrow(yield* store.get(id))
  })

/** A stored row's `availableAt`. */
export const availableAtOf = (id: NewOutboxMessage["id"]) => Effect.map(rowOf(id), (row) => row.availableAt)

export const statusOf = (id: NewOutboxMessage["id"]) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const row = yield* store.get(id)
    return Option.isSome(row) ? row.value.status : undefined
  })
