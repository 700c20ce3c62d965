/**
 * `purge`: finished rows older than an age, deleted through core's `Retention`; the dry run counts
 * them through the `ReadModel`.
 *
 * @since 0.1.0
 */
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { ReadModel } from "@effect-outbox/core/ReadModel"
import * as Retention from "@effect-outbox/core/Retention"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { OperatorError } from "./OperatorError.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface PurgeReport {
  readonly dryRun: boolean
  readonly statuses: ReadonlyArray<OutboxStatus>
  readonly olderThan: number
  /** Rows eligible (dry run) or deleted. */
  readonly rows: number
}

/**
 * Deletes finished rows last updated more than `olderThanMillis` ago, through
 * `Retention.runOnce` (bounded batches; only finished statuses are accepted). A dry run counts.
 *
 * @since 0.1.0
 * @category change
 */
export const purge = (request: {
  readonly olderThanMillis: number
  readonly statuses: ReadonlyArray<OutboxStatus>
  readonly execute: boolean
  readonly batchSize?: number | undefined
}) =>
  Effect.gen(function* () {
    const settings: Retention.Settings = {
      ...Retention.defaults,
      statuses: request.statuses,
      olderThan: Duration.millis(request.olderThanMillis),
      batchSize: request.batchSize ?? 1000,
      maxBatchesPerRound: Number.MAX_SAFE_INTEGER
    }
    const invalid = Retention.validate(settings)
    if (invalid !== undefined) return yield* new OperatorError({ reason: invalid.message })
    const olderThan = (yield* Clock.currentTimeMillis) - request.olderThanMillis
    if (!request.execute) {
      const readModel = yield* ReadModel
      const rows = yield* readModel.countPurgeable(request.statuses, olderThan)
      return { dryRun: true, statuses: request.statuses, olderThan, rows } satisfies PurgeReport
    }
    const rows = yield* Retention.runOnce(settings).pipe(
      Effect.catchTag("OutboxValidationError", (e) => Effect.fail(new OperatorError({ reason: e.message })))
    )
    return { dryRun: false, statuses: request.statuses, olderThan, rows } satisfies PurgeReport
  })
