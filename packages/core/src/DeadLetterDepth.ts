/**
 * Dead-letter depth: how many dead letters on a dead-letter topic wait for an operator.
 *
 * A dead-letter topic is append-only: a replayed dead letter stays on it. What has been dealt with
 * is recorded as a *replay position* per partition, the committed offset of the consumer group
 * {@link replayGroup} (a group no consumer ever joins; `DeadLetter.replay` moves it through
 * `BrokerAdmin`). The position moves over a record when that record was replayed, or is not a
 * dead letter, and every record before it was too. So:
 *
 *   pending(partition) = end offset − max(replay position, log start)
 *
 * is the number of records from the first dead letter not yet replayed to the end of the
 * partition. Replaying everything (`dlt replay --all`) brings it to 0; replaying selected dead
 * letters lowers it when they are the oldest ones not yet replayed (a later one replayed first is
 * counted until the gap before it is replayed too). Records removed by the topic's retention
 * are not counted.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { BrokerAdmin, type GroupOffsets } from "./BrokerAdmin.ts"
import type { BrokerAdminError, ConsumerSourceError } from "./Errors.ts"
import * as Telemetry from "./Telemetry.ts"
import { TopicReader } from "./TopicReader.ts"

/**
 * The consumer group whose committed offsets are the replay position of `deadLetterTopic`.
 *
 * @since 0.1.0
 * @category naming
 */
export const replayGroup = (deadLetterTopic: string): string => `effect-outbox.replay.${deadLetterTopic}`

/**
 * One dead-letter topic's depth.
 *
 * @since 0.1.0
 * @category models
 */
export interface Depth {
  readonly deadLetterTopic: string
  /** Dead letters not yet replayed (see the module's definition). */
  readonly pending: number
  /** Records on the topic (end − start): every dead letter it still holds, replayed or not. */
  readonly total: number
  readonly partitions: ReadonlyArray<{
    readonly partition: number
    /** The replay position; `null` before the first replay (counted from the log start). */
    readonly position: string | null
    readonly start: string
    readonly end: string
    readonly pending: number
  }>
}

const depthOf = (deadLetterTopic: string, offsets: ReadonlyArray<GroupOffsets>): Depth => {
  const partitions = offsets.map((o) => ({
    partition: o.partition,
    position: o.committed,
    start: o.start,
    end: o.end,
    pending: Telemetry.lagOf(o, { fromBeginning: true })
  }))
  return {
    deadLetterTopic,
    pending: partitions.reduce((n, p) => n + p.pending, 0),
    total: offsets.reduce((n, o) => n + Number(BigInt(o.end) - BigInt(o.start)), 0),
    partitions
  }
}

/**
 * Reads the depth of `deadLetterTopic` from the broker and sets `Telemetry.deadLettersPending`;
 * `None` when the topic does not exist (nothing was ever dead-lettered there).
 *
 * @since 0.1.0
 * @category depth
 */
export const sample = (deadLetterTopic: string): Effect.Effect<Option.Option<Depth>, BrokerAdminError, BrokerAdmin> =>
  Effect.gen(function* () {
    const admin = yield* BrokerAdmin
    const offsets = yield* admin.groupOffsets({ groupId: replayGroup(deadLetterTopic), topics: [deadLetterTopic] })
    const own = offsets.filter((o) => o.topic === deadLetterTopic)
    if (own.length === 0) return Option.none()
    const depth = depthOf(deadLetterTopic, own)
    yield* Metric.update(Metric.withAttributes(Telemetry.deadLettersPending, { topic: deadLetterTopic }), depth.pending)
    return Option.some(depth)
  })

/** One partition's read in {@link advance}: where it started, how far it got, and why it stopped. */
interface Progress {
  readonly from: bigint
  readonly end: bigint
  position: bigint
  blocked: boolean
  seen: boolean
}

/**
 * Moves the replay position of `deadLetterTopic` over the records `replayed` (their partition and
 * offset on the dead-letter topic), as far as the records before them allow: each partition's
 * position advances over replayed records and records that are not dead letters (`isDeadLetter`),
 * and stops at the first dead letter not replayed. Reads the topic from the positions to know
 * what lies between, as a stream that holds no records and stops once every partition's
 * position has stopped or reached the end.
 *
 * @since 0.1.0
 * @category depth
 */
export const advance = (
  deadLetterTopic: string,
  replayed: ReadonlyArray<{ readonly partition: number; readonly offset: string }>,
  isDeadLetter: (record: { readonly headers: Readonly<Record<string, string>> }) => boolean
): Effect.Effect<void, BrokerAdminError | ConsumerSourceError, BrokerAdmin | TopicReader> =>
  Effect.gen(function* () {
    if (replayed.length === 0) return
    const admin = yield* BrokerAdmin
    const reader = yield* TopicReader
    const groupId = replayGroup(deadLetterTopic)
    const offsets = yield* admin.groupOffsets({ groupId, topics: [deadLetterTopic] })
    const done = new Set(replayed.map((r) => `${r.partition}/${BigInt(r.offset)}`))
    const partitions = new Map(
      offsets
        .filter((o) => o.topic === deadLetterTopic)
        .map((o) => {
          const from = o.committed === null ? BigInt(o.start) : BigInt(o.committed)
          const state: Progress = { from, position: from, end: BigInt(o.end), blocked: false, seen: false }
          return [o.partition, state] as const
        })
    )
    const open = () => [...partitions.values()].some((p) => !p.blocked && p.position < p.end)
    // Each partition arrives in offset order: a position only moves forward, one record at a time.
    yield* reader.read(deadLetterTopic).pipe(
      Stream.takeWhile(open),
      Stream.runForEach((record) =>
        Effect.sync(() => {
          const p = partitions.get(record.partition)
          const offset = BigInt(record.offset)
          if (p === undefined || p.blocked || offset < p.from) return
          p.seen = true
          if (done.has(`${record.partition}/${offset}`) || !isDeadLetter(record)) p.position = offset + 1n
          else p.blocked = true
        })
      )
    )
    const moves: Array<{ partition: number; offset: string }> = []
    for (const [partition, p] of partitions) {
      // Read to the end without a dead letter left: past any trailing non-record offsets too.
      const position = !p.blocked && p.seen && p.end > p.position ? p.end : p.position
      if (position > p.from) moves.push({ partition, offset: String(position) })
    }
    yield* admin.commitGroupOffsets({ groupId, topic: deadLetterTopic, partitions: moves })
  }).pipe(Effect.withSpan(Telemetry.spans.deadLettersAdvance, { attributes: { "outbox.topic": deadLetterTopic } }))
