/**
 * Group-less reads of one partition with the client's raw `fetch` (no consumer group to join,
 * nothing to clean up): the probe and the topic reader both read a known offset range.
 *
 * @internal
 */
import type { ConsumerRecord } from "@effect-outbox/core/ConsumerSource"
import type { PartitionBounds, Range } from "@effect-outbox/kafka/Probe"
import * as TopicRead from "@effect-outbox/kafka/TopicRead"
import type { Consumer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import { brokerCall } from "../PlatformaticRetry.ts"
import { committedBatches } from "./abortedRecords.ts"
import { headersOf } from "./records.ts"

/** Control batches (transaction markers) carry no user records. */
const CONTROL_BATCH = 0x20

/**
 * Which records a read returns: every record that landed (the probe), or only those of committed
 * transactions and non-transactional writes, up to the last stable offset (the topic reader).
 */
export type Isolation = "uncommitted" | "committed"

const isolationLevel = (isolation: Isolation) => (isolation === "committed" ? 1 : 0)

/**
 * Every partition's log start and last stable offset (as far as a committed read reaches), and
 * with `timestamp` its first offset at or after it, read when called. Fails for a missing topic.
 */
export const bounds = (
  consumer: Consumer,
  topic: string,
  timestamp?: number
): Effect.Effect<ReadonlyArray<PartitionBounds>, unknown> =>
  Effect.map(
    brokerCall("listOffsets", () =>
      Promise.all([
        consumer.listOffsets({ topics: [topic], timestamp: -2n }),
        consumer.listOffsets({ topics: [topic], timestamp: -1n }),
        timestamp === undefined ? undefined : consumer.listOffsets({ topics: [topic], timestamp: BigInt(timestamp) })
      ])
    ),
    ([lows, highs, starts]) =>
      (highs.get(topic) ?? []).map((high, partition) => ({
        partition,
        low: lows.get(topic)?.[partition] ?? 0n,
        high,
        since: starts?.get(topic)?.[partition]
      }))
  )

/**
 * Fetches records of `range` starting at `from`, one fetch request: the records found (in
 * offset order, within the range) and the offset to fetch next.
 */
export const fetchOnce = (
  consumer: Consumer,
  topic: string,
  range: Range,
  from: bigint,
  maxBytes = 1_048_576,
  isolation: Isolation = "uncommitted"
): Effect.Effect<{ readonly records: ReadonlyArray<ConsumerRecord>; readonly next: bigint }, unknown> =>
  Effect.gen(function* () {
    const metadata = yield* brokerCall("metadata", () => consumer.metadata({ topics: [topic] }))
    const info = metadata.topics.get(topic)
    const leader = info?.partitions[range.partition]?.leader
    if (info === undefined || leader === undefined) {
      return yield* Effect.fail(new Error(`no leader known for ${topic}/${range.partition}`))
    }
    const response = yield* brokerCall("fetch", () =>
      consumer.fetch({
        node: leader,
        maxWaitTime: 100,
        maxBytes,
        // The probe reads uncommitted (any record that landed), the topic reader committed.
        isolationLevel: isolationLevel(isolation),
        topics: [
          {
            topicId: info.id,
            partitions: [
              {
                partition: range.partition,
                currentLeaderEpoch: -1,
                fetchOffset: from,
                lastFetchedEpoch: -1,
                partitionMaxBytes: maxBytes
              }
            ]
          }
        ]
      })
    )
    const answer = response.responses[0]?.partitions.find((p) => p.partitionIndex === range.partition)
    if (answer !== undefined && answer.errorCode !== 0) {
      return yield* Effect.fail(
        new Error(`fetch of ${topic}/${range.partition} answered error code ${answer.errorCode}`)
      )
    }
    const records: Array<ConsumerRecord> = []
    let next = from
    for (const batch of answer?.records ?? []) {
      const last = batch.firstOffset + BigInt(batch.lastOffsetDelta)
      if (last + 1n > next) next = last + 1n
    }
    const visible = answer === undefined ? [] : isolation === "committed" ? committedBatches(answer) : answer.records
    for (const batch of visible ?? []) {
      if ((batch.attributes & CONTROL_BATCH) !== 0) continue
      for (const record of batch.records) {
        const offset = batch.firstOffset + BigInt(record.offsetDelta)
        if (offset < from || offset < range.start || offset >= range.end) continue
        records.push({
          topic,
          partition: range.partition,
          offset: offset.toString(),
          key: record.key === null ? null : record.key.toString(),
          headers: headersOf(record.headers),
          value: record.value === null ? new Uint8Array(0) : new Uint8Array(record.value),
          timestamp: Number(batch.firstTimestamp + record.timestampDelta)
        })
      }
    }
    return { records, next }
  })

/** The records of `ranges`, one fetch at a time; a fetch that makes no progress ends its range. */
export const readRanges = (
  consumer: Consumer,
  topic: string,
  ranges: ReadonlyArray<Range>,
  isolation: Isolation,
  fetchBytes = 1_048_576
): Stream.Stream<ConsumerRecord, unknown> =>
  TopicRead.paged(ranges, (range, from) => fetchOnce(consumer, topic, range, from, fetchBytes, isolation))
