/**
 * A read-only, group-less view of a topic, used to inspect and replay dead letters.
 *
 * adapter-kafka implements it with a consumer that joins no group (or a throwaway group that
 * never commits): fetch the partitions' low and high watermarks when the read starts, read each
 * partition from its low watermark up to that high watermark, and stop. Records appended after
 * the read started are not part of it, so a replay that republishes into the same cluster always
 * terminates. `readAt` reads chosen offsets of one partition by position (releasing a durably
 * parked key), without reading the partition from its start.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Stream from "effect/Stream"
import type { ConsumerRecord } from "./ConsumerSource.ts"
import type { ConsumerSourceError } from "./Errors.ts"

/**
 * Records of one partition wanted by position (offsets as decimal strings).
 *
 * @since 0.1.0
 * @category models
 */
export interface PositionedRead {
  readonly topic: string
  readonly partition: number
  readonly offsets: ReadonlyArray<string>
}

/**
 * The `[start, end)` range a positioned read covers within a partition's retained `[low, high)`:
 * from the lowest wanted offset to just after the highest, or `undefined` when nothing wanted is
 * retained.
 *
 * @since 0.1.0
 * @category positions
 */
export const positionedRange = (
  offsets: ReadonlyArray<string>,
  low: bigint,
  high: bigint
): { readonly start: bigint; readonly end: bigint } | undefined => {
  const wanted = offsets
    .map((o) => BigInt(o))
    .filter((o) => o >= low && o < high)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  if (wanted.length === 0) return undefined
  return { start: wanted[0]!, end: wanted[wanted.length - 1]! + 1n }
}

/**
 * @since 0.1.0
 * @category services
 */
export class TopicReader extends Context.Service<
  TopicReader,
  {
    /**
     * Every retained record of `topic` up to the high watermarks observed when the read starts:
     * each partition in offset order (partitions may interleave). Commits nothing, joins no group.
     * A topic that does not exist fails with a non-retriable `ConsumerSourceError` whose
     * `operation` is `"read"`.
     */
    readonly read: (topic: string) => Stream.Stream<ConsumerRecord, ConsumerSourceError>
    /**
     * The retained records at `offsets` of one partition, in offset order: the read starts at the
     * lowest of them (never at the low watermark) and stops after the highest. An offset the topic
     * no longer holds (retention) or never held is absent from the stream. A topic that does not
     * exist fails as `read` does. Optional: without it, callers read the whole topic.
     */
    readonly readAt?: ((request: PositionedRead) => Stream.Stream<ConsumerRecord, ConsumerSourceError>) | undefined
  }
>()("@effect-outbox/core/TopicReader") {}
