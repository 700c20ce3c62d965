/**
 * What the `Transactor` cases share: the services under test and the feature switches.
 *
 * @internal
 */
import type { InboxStore } from "@effect-outbox/core/InboxStore"
import type { OutboxStore } from "@effect-outbox/core/OutboxStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = Transactor | OutboxStore | InboxStore

/** The suite's feature switches (documented on `TransactorSuite.Features`). */
export type Feature = "isolation"

export type Case<R = never> = SuiteCase.Case<void, Services | R, Feature>
