/**
 * What the `InboxStore` cases share: the services under test, the feature switches, and keys.
 *
 * @internal
 */
import type { InboxStore, ProcessedKey } from "@effect-outbox/core/InboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = InboxStore | Transactor

/** The suite's feature switches (documented on `InboxStoreSuite.Features`). */
export type Feature = "concurrentTransactions"

export type Case = SuiteCase.Case<void, Services, Feature>

export const key = (identity: string, consumer = "billing"): ProcessedKey => ({ consumer, identity })
