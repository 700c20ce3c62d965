/**
 * What the `LifecycleRegistry` cases share: the service under test.
 *
 * @internal
 */
import type { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import type * as SuiteCase from "../suiteCase.ts"

export type Case = SuiteCase.Case<void, LifecycleRegistry>
