/**
 * The receipts of one acknowledged record batch: record `i` of the batch is at `base + i`.
 */
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import type { PublishOutcome } from "@effect-outbox/core/Publisher"
import * as Result from "effect/Result"

/**
 * Writes each record's receipt at its `index` in `outcomes`. Offsets are counted as numbers while
 * they stay exact (every real offset does): two `bigint`s per record cost more than the receipt.
 */
export const write = (
  outcomes: Array<PublishOutcome | undefined>,
  topic: string,
  partition: number,
  base: bigint,
  records: ReadonlyArray<{ readonly index: number }>
): void => {
  const exact = base >= 0n && base <= BigInt(Number.MAX_SAFE_INTEGER - records.length)
  const first = Number(base)
  for (let i = 0; i < records.length; i++) {
    const offset = exact ? String(first + i) : (base + BigInt(i)).toString()
    outcomes[records[i]!.index] = Result.succeed<PublishReceipt>({ topic, partition, offset })
  }
}
