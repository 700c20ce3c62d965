/**
 * The conformance suite of the `ParkedStore` port (durable parking): positions per consumer
 * group, keys listed head first with offsets in order, idempotent parking, removal, the bound.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour and its
 * case function under `internal/suites/parkedStore/`.
 *
 * @since 0.1.0
 */
import type { ParkedStore } from "@effect-outbox/core/ParkedStore"
import type * as Layer from "effect/Layer"
import * as Bound from "./internal/suites/parkedStore/bound.ts"
import * as Positions from "./internal/suites/parkedStore/positions.ts"
import type * as Support from "./internal/suites/parkedStore/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Fresh services for every test, with the store's bound set to `maxRecords`. */
  readonly layer: (maxRecords: number) => Layer.Layer<ParkedStore, unknown>
  /** Per-test timeout in milliseconds (default 60 000). */
  readonly timeout?: number
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Positions.parkedListedHeadFirst,
  Positions.removedForgotten,
  Positions.releaseRequestsKept,
  Positions.parkedAtOldest,
  Bound.boundRefusesPark
]

/**
 * Registers the suite under `describe(name)`: every case on a store of its own.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void =>
  SuiteCase.register(`${name} (ParkedStore conformance)`, cases, {
    features: {},
    run: (c) => c.run({ layer: options.layer }),
    timeout: options.timeout ?? 60_000
  })
