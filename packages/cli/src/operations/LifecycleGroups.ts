/**
 * `lifecycle`: which consumer group drives the outbox lifecycle of each topic, and handing the
 * role over. A runtime refuses to start a second driving group on a topic; when the registered
 * group is retired (or renamed), the operator releases its registration so another may take it.
 *
 * @since 0.1.0
 */
import { LifecycleRegistry, type Registration } from "@effect-outbox/core/LifecycleRegistry"
import * as Effect from "effect/Effect"
import { OperatorError } from "./OperatorError.ts"

/**
 * The registrations, by topic; filtered by topic and group.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const lifecycleList = (filter: { readonly topic?: string | undefined; readonly group?: string | undefined }) =>
  LifecycleRegistry.use((registry) => registry.list(filter))

/**
 * @since 0.1.0
 * @category models
 */
export interface LifecycleReleaseReport {
  readonly dryRun: boolean
  readonly registration: Registration
  readonly released: boolean
}

/**
 * Removes `group`'s registration on `topic`, so another group may drive the topic's lifecycle
 * at its next start. Stop the registered group's services first (or switch them to
 * `lifecycle: false`): the registration is checked at start only. Audited; dry run unless
 * `execute`.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const lifecycleRelease = (request: {
  readonly topic: string
  readonly group: string
  readonly operator: string
  readonly reason: string
  readonly execute: boolean
}) =>
  Effect.gen(function* () {
    const registry = yield* LifecycleRegistry
    if (request.reason.trim() === "") {
      return yield* new OperatorError({ reason: "--reason is required: the release is audited" })
    }
    if (request.operator.trim() === "") {
      return yield* new OperatorError({ reason: "--operator is required (defaults to $USER): the release is audited" })
    }
    const [held] = yield* registry.list({ topic: request.topic })
    if (held === undefined || held.group !== request.group) {
      return yield* new OperatorError({
        reason:
          held === undefined
            ? `no group is registered on topic ${request.topic} (see: effect-outbox lifecycle list)`
            : `topic ${request.topic} is registered to group ${held.group}, not ${request.group}`
      })
    }
    if (!request.execute) return { dryRun: true, registration: held, released: false } satisfies LifecycleReleaseReport
    const released = yield* registry.release(request.topic, request.group)
    yield* Effect.logWarning(
      `AUDIT outbox lifecycle release by ${request.operator}: group ${request.group} no longer drives ` +
        `topic ${request.topic} (${request.reason})`
    ).pipe(
      Effect.annotateLogs({
        audit: "outbox.lifecycle.release",
        operator: request.operator,
        reason: request.reason,
        topic: request.topic,
        group: request.group
      })
    )
    return { dryRun: false, registration: held, released } satisfies LifecycleReleaseReport
  })
