/**
 * The conformance suite of the `OutboxStore` port: every adapter (in-memory, PostgreSQL, a third
 * party's) runs these same named behaviours. Each test builds a fresh layer.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/outboxStore/`.
 *
 * ```ts
 * import { OutboxStoreSuite } from "@effect-outbox/testing"
 * OutboxStoreSuite.suite("PgOutboxStore", { layer: () => PgOutboxStore.layer.pipe(...) })
 * ```
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Claim from "./internal/suites/outboxStore/claim.ts"
import * as Insert from "./internal/suites/outboxStore/insert.ts"
import * as Outage from "./internal/suites/outboxStore/outage.ts"
import * as Purge from "./internal/suites/outboxStore/purge.ts"
import * as Reads from "./internal/suites/outboxStore/reads.ts"
import * as Recovery from "./internal/suites/outboxStore/recovery.ts"
import type * as Support from "./internal/suites/outboxStore/support.ts"
import * as Transition from "./internal/suites/outboxStore/transition.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * The services a tested adapter provides.
 *
 * @since 0.1.0
 * @category models
 */
export type Services = OutboxStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Uncommitted writes are invisible to other callers (READ COMMITTED or stronger). */
  readonly isolation?: boolean
  /** Several claims may run at once (a store that serialises all calls still passes). */
  readonly concurrentClaims?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** A fresh, empty store for every test. */
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 60 000). */
  readonly timeout?: number
  /**
   * The same store over a database it cannot reach (a closed port, an in-memory database that
   * is down), for the outage case. Without it the case does not run.
   */
  readonly unreachable?: () => Layer.Layer<Services, unknown>
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<SuiteCase.Case<void, Services, Support.Feature & keyof Features>> = [
  Insert.insertStoresEveryField,
  Insert.rolledBackInsert,
  Insert.uncommittedInsertInvisible,
  Claim.claimLeasesKeyPrefix,
  Claim.claimHonoursLimit,
  Claim.dispatchingRowBlocksKey,
  Claim.backingOffHeadBlocksKey,
  Claim.retriedHeadBeyondOneScan,
  Claim.nullKeysAndPrequeuedRows,
  Claim.failureHeadBlocksKey,
  Claim.concurrentClaimsOneOwnerPerKey,
  Recovery.expiredLeaseFoundStale,
  Recovery.findStalePages,
  Recovery.findStaleOnStoreClock,
  Recovery.recoveryLeaseOneHolder,
  Recovery.concurrentRecoverers,
  Transition.transitionCompareAndSet,
  Transition.transitionChecksLeaseOwner,
  Transition.waitingHeadTakesItsKey,
  Transition.claimMovesWaitingKeys,
  Transition.setAsideRowsComeBackWhenHeadFails,
  Transition.rolledBackTransition,
  Reads.listFilters,
  Reads.listByLastUpdate,
  Reads.statsByStatus,
  Purge.purgeSkipsLockedRows,
  Purge.purgeHonoursLimit,
  Purge.retentionDrainsBacklog,
  Outage.unreachableFailsRetriably
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer (the outage case on `unreachable`, when given).
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { isolation: true, concurrentClaims: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  describe(`${name} (OutboxStore conformance)`, () => {
    for (const c of SuiteCase.enabled(cases, features)) {
      const layer = c.unreachable ? options.unreachable : options.layer
      if (layer !== undefined) it.live(c.name, () => Effect.provide(c.run(), layer()), timeout)
    }
  })
}
