/**
 * The conformance suite of the `Transactor` port, seen through the stores that join its
 * transactions: commit, rollback on failure / defect / interruption, nesting, isolation. Each test
 * builds a fresh layer.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/transactor/`.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as SuiteCase from "./internal/suites/suiteCase.ts"
import * as Commit from "./internal/suites/transactor/commit.ts"
import * as Isolation from "./internal/suites/transactor/isolation.ts"
import * as Nesting from "./internal/suites/transactor/nesting.ts"
import * as Outage from "./internal/suites/transactor/outage.ts"
import type * as Support from "./internal/suites/transactor/support.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = Transactor | OutboxStore | InboxStore

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Uncommitted writes are invisible to other callers. */
  readonly isolation?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  readonly layer: () => Layer.Layer<Services | R, unknown>
  readonly features?: Features
  readonly timeout?: number
  /**
   * Run inside a transaction: makes the server end that transaction's connection (PostgreSQL:
   * `pg_terminate_backend(pg_backend_pid())`, as a shutdown or failover does; in memory: an
   * outage). Its own failure is ignored. Without it the outage case does not run.
   */
  readonly terminateConnection?: Effect.Effect<unknown, unknown, Services | R>
}

/**
 * Every case, in the order the suite registers them; the outage case only with the adapter's
 * `terminateConnection`.
 */
const cases = <R>(
  terminate: Effect.Effect<unknown, unknown, Services | R> | undefined
): ReadonlyArray<Support.Case<R>> => [
  Commit.commitsTogether,
  Commit.failureRollsBack,
  Commit.defectRollsBack,
  Commit.interruptionRollsBack,
  Nesting.nestedJoinsOuter,
  Nesting.readsOwnWrites,
  ...(terminate === undefined ? [] : [Outage.connectionEnded(terminate)]),
  Isolation.uncommittedInvisible,
  Isolation.writesOutsideApplyAtOnce
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { isolation: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  describe(`${name} (Transactor conformance)`, () => {
    for (const c of SuiteCase.enabled(cases(options.terminateConnection), features)) {
      it.live(c.name, () => Effect.provide(c.run(), options.layer()), timeout)
    }
  })
}
