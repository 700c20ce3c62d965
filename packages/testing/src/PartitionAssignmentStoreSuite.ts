/**
 * The conformance suite of the `PartitionAssignmentStore` port (sequential assignment).
 * Each test builds a fresh layer.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/partitionAssignment/`.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Concurrency from "./internal/suites/partitionAssignment/concurrency.ts"
import * as Reserve from "./internal/suites/partitionAssignment/reserve.ts"
import type * as Support from "./internal/suites/partitionAssignment/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = PartitionAssignmentStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** `reserve` joins an ambient transaction (a rolled-back user creation leaves no assignment). */
  readonly transactional?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  readonly timeout?: number
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<SuiteCase.Case<void, Services, Support.Feature & keyof Features>> = [
  Reserve.firstOwnerGetsZero,
  Reserve.fillsUpToCapacity,
  Reserve.reserveIdempotent,
  Reserve.lookupOwner,
  Reserve.topicsIndependent,
  Reserve.higherCapacity,
  Concurrency.concurrentFillExactly,
  Concurrency.concurrentSameOwner,
  Concurrency.rolledBackReservation
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { transactional: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  describe(`${name} (PartitionAssignmentStore conformance)`, () => {
    for (const c of SuiteCase.enabled(cases, features)) {
      it.live(c.name, () => Effect.provide(c.run(), options.layer()), timeout)
    }
  })
}
