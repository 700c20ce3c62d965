/**
 * What the `PartitionAssignmentStore` cases share: the services under test, the feature switches,
 * and the per-partition counts as a plain object (for `deepStrictEqual`).
 *
 * @internal
 */
import type { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import type { Transactor } from "@effect-outbox/core/Transactor"
import type * as SuiteCase from "../suiteCase.ts"

export type Services = PartitionAssignmentStore | Transactor

/** The suite's feature switches (documented on `PartitionAssignmentStoreSuite.Features`). */
export type Feature = "transactional"

export type Case = SuiteCase.Case<void, Services, Feature>

export const asObject = (counts: ReadonlyMap<number, number>) =>
  Object.fromEntries([...counts].sort((a, b) => a[0] - b[0]))
