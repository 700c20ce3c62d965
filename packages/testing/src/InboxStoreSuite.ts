/**
 * The conformance suite of the `InboxStore` port (processed-message records). Each test
 * builds a fresh layer.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour, the
 * feature it needs, and its case function under `internal/suites/inboxStore/`.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Batch from "./internal/suites/inboxStore/batch.ts"
import * as Concurrency from "./internal/suites/inboxStore/concurrency.ts"
import * as Purge from "./internal/suites/inboxStore/purge.ts"
import * as Record from "./internal/suites/inboxStore/record.ts"
import type * as Support from "./internal/suites/inboxStore/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = InboxStore | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Two open transactions may record the same key at once; the later one waits and sees the outcome. */
  readonly concurrentTransactions?: boolean
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
  Record.firstRecordThenDuplicate,
  Record.keyIsConsumerAndIdentity,
  Record.rolledBackRecord,
  Record.duplicateInSameTransaction,
  Record.defectRollsBack,
  Batch.recordBatchInOrder,
  Batch.recordBatchKeyTwice,
  Batch.rolledBackRecordBatch,
  Concurrency.laterSeesDuplicate,
  Concurrency.laterRecordsAfterRollback,
  Concurrency.recordBatchWaits,
  Purge.purgeForgetsWholeSpans,
  Purge.uuidIdentityCarriesItsTime,
  Purge.retentionForgetsInOneRound
]

/**
 * Registers the suite under `describe(name)`: every case whose feature the adapter offers, each
 * on a fresh layer.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { concurrentTransactions: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  describe(`${name} (InboxStore conformance)`, () => {
    for (const c of SuiteCase.enabled(cases, features)) {
      it.live(c.name, () => Effect.provide(c.run(), options.layer()), timeout)
    }
  })
}
