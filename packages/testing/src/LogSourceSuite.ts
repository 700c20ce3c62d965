/**
 * The conformance suite of the log engine's ports, `LogSource` and `LogWriter`: what
 * `LogRelay` relies on. Each test builds a fresh layer (a fresh log or slot).
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/logSource/`. The helpers the
 * cases use are public, for adapter tests of the same ports.
 *
 * @since 0.1.0
 */

import type { LogMessage } from "@effect-outbox/core/LogRecord"
import type { LogLease, LogSource, LogWindow } from "@effect-outbox/core/LogSource"
import type { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Lease from "./internal/suites/logSource/lease.ts"
import * as Support from "./internal/suites/logSource/support.ts"
import * as Windows from "./internal/suites/logSource/windows.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = LogSource | LogWriter | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** `emit` joins the ambient transaction: a rolled-back transaction leaves no event. */
  readonly transactional?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Fresh services for every test (a fresh log or slot). */
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 60 000). */
  readonly timeout?: number
}

/**
 * A UUIDv7 of now, as `Outbox.enqueue` makes them (a source may file events by the id's time).
 *
 * @since 0.1.0
 * @category helpers
 */
export const eventId: () => EventId = Support.eventId

/**
 * An entry as written: without the `position` a source stamps on what it reads.
 *
 * @since 0.1.0
 * @category helpers
 */
export const written: (entry: LogMessage) => LogMessage = Support.written

/**
 * Commits each group as one transaction.
 *
 * @since 0.1.0
 * @category helpers
 */
export const commit: (
  groups: ReadonlyArray<ReadonlyArray<LogMessage>>
) => Effect.Effect<void, unknown, LogWriter | Transactor> = Support.commit

/**
 * Reads until the window holds `n` entries (a server may make commits readable a moment later).
 *
 * @since 0.1.0
 * @category helpers
 */
export const readAtLeast: (lease: LogLease, n: number, maxEntries?: number) => Effect.Effect<LogWindow, unknown> =
  Support.readAtLeast

/**
 * The lease, which the case expects to be free.
 *
 * @since 0.1.0
 * @category helpers
 */
export const acquired: Effect.Effect<LogLease, unknown, LogSource | Scope.Scope> = Support.acquired

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Windows.readsInCommitOrder,
  Windows.windowEndsOnTransaction,
  Lease.oneLease,
  Lease.readAfterFollows,
  Lease.awaitMoreWakes,
  Windows.positionIsUpTo,
  Windows.emptyWindow,
  Windows.rollbackNeverRead
]

/**
 * Registers the suite under `describe(name)`: every case the adapter offers, on a fresh layer in
 * its own scope.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void =>
  SuiteCase.register(`${name} (LogSource / LogWriter conformance)`, cases, {
    features: { transactional: options.features?.transactional ?? true },
    run: (c) => Effect.provide(Effect.scoped(c.run()), options.layer()),
    timeout: options.timeout ?? 60_000
  })
