/**
 * The conformance suite of the `LifecycleRegistry` port: one driving group per topic, the same
 * group accepted again, another refused with a typed error naming both, release hands over.
 *
 * The suite is a table of named cases (Watermill's shape): each row names a behaviour and its
 * case function under `internal/suites/lifecycleRegistry/`.
 *
 * @since 0.1.0
 */
import type { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Registrations from "./internal/suites/lifecycleRegistry/registrations.ts"
import type * as Support from "./internal/suites/lifecycleRegistry/support.ts"
import * as SuiteCase from "./internal/suites/suiteCase.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Fresh services for every test. */
  readonly layer: () => Layer.Layer<LifecycleRegistry, unknown>
  readonly timeout?: number
}

/** Every case, in the order the suite registers them. */
const cases: ReadonlyArray<Support.Case> = [
  Registrations.firstGroupTakesTopic,
  Registrations.otherGroupRefused,
  Registrations.releaseHandsOver
]

/**
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void =>
  SuiteCase.register(`${name} (LifecycleRegistry conformance)`, cases, {
    features: {},
    run: (c) => Effect.provide(c.run(), options.layer()),
    timeout: options.timeout ?? 60_000
  })
