/**
 * `parked`: the durably parked keys of consumer groups, and a release request for one.
 *
 * @since 0.1.0
 */
import { ParkedStore, type ReleaseTarget } from "@effect-outbox/core/ParkedStore"
import * as Effect from "effect/Effect"
import { OperatorError } from "./OperatorError.ts"

/**
 * The parked keys of a consumer group (or of every group), head first.
 *
 * @since 0.1.0
 * @category parked
 */
export const parkedList = (options: { readonly group?: string | undefined } = {}) =>
  ParkedStore.use((store) => store.list({ consumer: options.group }))

/**
 * @since 0.1.0
 * @category models
 */
export interface ParkedReleaseReport {
  readonly dryRun: boolean
  readonly target: ReleaseTarget
  /** The key's parked offsets, head first (empty: the key is not parked). */
  readonly offsets: ReadonlyArray<string>
  readonly requested: boolean
}

/**
 * Asks the consumer that owns the key's partition to release it: the member re-reads the parked
 * records by position and runs them head first, in offset order (within its
 * `parkedReleaseInterval`). The CLI has no handler to run them itself. Dry run unless `execute`.
 *
 * @since 0.1.0
 * @category parked
 */
export const parkedRelease = (options: ReleaseTarget & { readonly execute: boolean }) =>
  Effect.gen(function* () {
    const store = yield* ParkedStore
    const target: ReleaseTarget = {
      consumer: options.consumer,
      topic: options.topic,
      partition: options.partition,
      key: options.key
    }
    const parked = (yield* store.list({
      consumer: target.consumer,
      topic: target.topic,
      partition: target.partition
    })).find((k) => k.key === target.key)
    if (parked === undefined) {
      return yield* new OperatorError({
        reason: `key ${target.key} of ${target.topic}/${target.partition} is not parked for group ${target.consumer} (see: effect-outbox parked list)`
      })
    }
    if (options.execute) yield* store.requestRelease(target)
    return {
      dryRun: !options.execute,
      target,
      offsets: parked.offsets,
      requested: options.execute
    } satisfies ParkedReleaseReport
  })
