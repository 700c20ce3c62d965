/**
 * The durable record of which consumer group drives the outbox lifecycle of each topic, shared by
 * every process on one outbox. Moving a row to `SUCCESS` is the driving group's job; a second
 * driving group, in this process or another, would find the rows already finished and skip the
 * events. The runtime registers its driving groups at start and refuses to start when another
 * group holds a topic; an operator hands the role over with `release`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { LifecycleGroupConflictError, StoreError } from "./Errors.ts"

/**
 * One topic's driving group.
 *
 * @since 0.1.0
 * @category models
 */
export interface Registration {
  readonly topic: string
  readonly group: string
  /** When the group first took the role (epoch milliseconds). */
  readonly registeredAt: number
  /** When a member of the group last started (epoch milliseconds). */
  readonly startedAt: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class LifecycleRegistry extends Context.Service<
  LifecycleRegistry,
  {
    /**
     * Takes the role for `group` on `topic`, or confirms it when `group` already holds it (a
     * restart, another member). Fails with `LifecycleGroupConflictError` (its `registered` set)
     * when another group holds it. Atomic across processes.
     */
    readonly register: (
      topic: string,
      group: string
    ) => Effect.Effect<Registration, LifecycleGroupConflictError | StoreError>
    /** Registrations, by topic; filtered by topic and group. */
    readonly list: (filter?: {
      readonly topic?: string | undefined
      readonly group?: string | undefined
    }) => Effect.Effect<ReadonlyArray<Registration>, StoreError>
    /** Removes `group`'s registration on `topic`; `false` when `group` did not hold it. */
    readonly release: (topic: string, group: string) => Effect.Effect<boolean, StoreError>
  }
>()("@effect-outbox/core/LifecycleRegistry") {}
