/**
 * Consumer lag read from the broker: the group's committed offsets against the logs' ends.
 * Exported through `Telemetry`, which owns the gauge.
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import { BrokerAdmin, type GroupOffsets } from "../../BrokerAdmin.ts"
import type { BrokerAdminError } from "../../Errors.ts"

/**
 * A partition's offsets with the group's lag on it.
 *
 * @since 0.1.0
 * @category consumer lag
 */
export interface PartitionLag extends GroupOffsets {
  readonly groupId: string
  readonly lag: number
}

/**
 * The lag of a group on one partition: records between its committed offset (or the log start,
 * when retention removed what it had not read) and the end of the log. A group that never
 * committed on the partition counts from the log start when it reads from the beginning (the
 * consumer's default), and as caught up with `fromBeginning: false` (it then starts at the end).
 *
 * @since 0.1.0
 * @category consumer lag
 */
export const lagOf = (
  offsets: GroupOffsets,
  options: { readonly fromBeginning?: boolean | undefined } = {}
): number => {
  const start = BigInt(offsets.start)
  const end = BigInt(offsets.end)
  const position =
    offsets.committed === null ? (options.fromBeginning !== false ? start : end) : BigInt(offsets.committed)
  const lag = end - (position > start ? position : start)
  return lag > 0n ? Number(lag) : 0
}

/** Reads the group's offsets and sets `gauge` per partition (see `Telemetry.sampleConsumerLag`). */
export const sample = (
  gauge: Metric.Metric<number, unknown>,
  request: {
    readonly groupId: string
    readonly topics: ReadonlyArray<string>
    readonly fromBeginning?: boolean | undefined
  }
): Effect.Effect<ReadonlyArray<PartitionLag>, BrokerAdminError, BrokerAdmin> =>
  Effect.gen(function* () {
    const admin = yield* BrokerAdmin
    const offsets = yield* admin.groupOffsets({ groupId: request.groupId, topics: request.topics })
    const rows = offsets.map(
      (o): PartitionLag => ({ ...o, groupId: request.groupId, lag: lagOf(o, { fromBeginning: request.fromBeginning }) })
    )
    for (const row of rows) {
      yield* Metric.update(
        Metric.withAttributes(gauge, { group: row.groupId, topic: row.topic, partition: String(row.partition) }),
        row.lag
      )
    }
    return rows
  })
