/**
 * `BrokerProbe` over any Kafka client: did a timed-out send land after all? Reads the window of
 * a partition (or of every partition) from the first record written at or after `since` (minus a
 * clock-skew margin: record timestamps come from the producer's clock) up to the end offset
 * captured at the start, looking for records whose `event-id` header matches. The client supplies
 * how it reads the window's bounds and its records ({@link ProbeDriver}).
 *
 * @since 0.1.0
 */
import { BrokerProbe, type ProbeManyRequest, type ProbeRequest } from "@effect-outbox/core/BrokerProbe"
import { ProbeError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type EventId, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { liveClock } from "./BrokerRetry.ts"
import type { Protocol } from "./KafkaProtocol.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface ProbeOptions {
  /** Give up (with `ProbeError`, not `None`) after this long (default 30000 ms). */
  readonly timeoutMillis?: number | undefined
  /** Give up (with `ProbeError`) after reading this many records (default 1,000,000). */
  readonly maxRecords?: number | undefined
  /** Start reading this much before `since` (default 60000 ms). */
  readonly clockSkewMillis?: number | undefined
}

/**
 * One partition's offsets: the log's start and end, and the first offset at or after the
 * window's timestamp (`undefined` or negative: no record since).
 *
 * @since 0.1.0
 * @category models
 */
export interface PartitionBounds {
  readonly partition: number
  readonly low: bigint
  readonly high: bigint
  readonly since: bigint | undefined
}

/**
 * `[start, end)` of one partition to read.
 *
 * @since 0.1.0
 * @category models
 */
export interface Range {
  readonly partition: number
  readonly start: bigint
  readonly end: bigint
}

/**
 * A record as the probe sees it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Seen {
  readonly topic: string
  readonly partition: number
  readonly offset: string
  readonly headers: Readonly<Record<string, string>>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ProbeDriver {
  readonly protocol: Protocol
  /** Every partition's bounds for records written at or after `timestamp`; fails for a missing topic. */
  readonly bounds: (topic: string, timestamp: number) => Effect.Effect<ReadonlyArray<PartitionBounds>, unknown>
  /** Reads `ranges`, handing each record to `visit`, until every range is read or `visit` says stop. */
  readonly scan: (
    topic: string,
    ranges: ReadonlyArray<Range>,
    visit: (record: Seen) => "continue" | "stop"
  ) => Effect.Effect<void, unknown>
}

/**
 * The ranges of a window: partitions with nothing in it are left out.
 *
 * @since 0.1.0
 * @category operations
 */
export const rangesOf = (bounds: ReadonlyArray<PartitionBounds>, partition: number | null): Array<Range> =>
  bounds.flatMap(({ high, low, partition: p, since }) => {
    if (partition !== null && p !== partition) return []
    const start = since === undefined || since < 0n ? high : since
    const from = start < low ? low : start
    return from < high ? [{ partition: p, start: from, end: high }] : []
  })

type Window = Pick<ProbeRequest, "topic" | "partition" | "since">

/** The receipts of the wanted ids found in one read of the window. */
const search = (
  driver: ProbeDriver,
  request: Window,
  wanted: ReadonlySet<string>,
  options: ProbeOptions
): Effect.Effect<Map<EventId, PublishReceipt>, ProbeError> => {
  const timeoutMillis = options.timeoutMillis ?? 30_000
  const maxRecords = options.maxRecords ?? 1_000_000
  const found = new Map<EventId, PublishReceipt>()
  let read = 0
  return Effect.gen(function* () {
    const since = Math.max(0, request.since - (options.clockSkewMillis ?? 60_000))
    const ranges = rangesOf(yield* driver.bounds(request.topic, since), request.partition)
    if (ranges.length === 0) return found
    yield* driver.scan(request.topic, ranges, (record) => {
      read++
      const id = record.headers[EVENT_ID_HEADER]
      if (id !== undefined && wanted.has(id) && !found.has(id as EventId)) {
        found.set(id as EventId, { topic: record.topic, partition: record.partition, offset: record.offset })
        if (found.size === wanted.size) return "stop"
      }
      return read >= maxRecords ? "stop" : "continue"
    })
    if (found.size < wanted.size && read >= maxRecords) {
      return yield* new ProbeError({ topic: request.topic, reason: `gave up after reading ${read} records` })
    }
    return found
  }).pipe(
    Effect.catch((error) =>
      error instanceof ProbeError
        ? Effect.fail(error)
        : driver.protocol.isUnknownTopic(error)
          ? Effect.succeed(found)
          : Effect.fail(driver.protocol.toProbeError(request.topic, error))
    ),
    Effect.timeoutOrElse({
      duration: timeoutMillis,
      orElse: () =>
        Effect.fail(
          new ProbeError({
            topic: request.topic,
            reason: `no answer within ${timeoutMillis} ms (read ${read} records)`
          })
        )
    }),
    // The broker lives in real time, also under a TestClock.
    Effect.provideService(Clock.Clock, liveClock),
    Effect.tapError((error) => Effect.logDebug(`kafka probe failed: ${error.message}`))
  )
}

/**
 * @since 0.1.0
 * @category operations
 */
export const find = (
  driver: ProbeDriver,
  request: ProbeRequest,
  options: ProbeOptions = {}
): Effect.Effect<Option.Option<PublishReceipt>, ProbeError> =>
  search(driver, request, new Set([request.eventId]), options).pipe(
    Effect.map((found) => Option.fromNullishOr(found.get(request.eventId))),
    Effect.tap((found) =>
      Effect.logDebug(
        `kafka probe ${request.topic}/${request.partition ?? "*"} for ${request.eventId}: ${Option.isSome(found) ? `found at ${found.value.partition}@${found.value.offset}` : "absent"}`
      )
    ),
    Effect.withSpan("kafka.probe.find", { attributes: { topic: request.topic, partition: request.partition ?? -1 } })
  )

/**
 * Every event of `eventIds` found in one read of the window: the log relay's takeover probe.
 *
 * @since 0.1.0
 * @category operations
 */
export const findMany = (
  driver: ProbeDriver,
  request: ProbeManyRequest,
  options: ProbeOptions = {}
): Effect.Effect<ReadonlyMap<EventId, PublishReceipt>, ProbeError> =>
  request.eventIds.length === 0
    ? Effect.succeed(new Map())
    : search(driver, request, new Set<string>(request.eventIds), options).pipe(
        Effect.withSpan("kafka.probe.findMany", {
          attributes: { topic: request.topic, count: request.eventIds.length }
        })
      )

/**
 * The port over a driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (driver: ProbeDriver, options: ProbeOptions = {}): BrokerProbe["Service"] =>
  BrokerProbe.of({
    find: (request) => find(driver, request, options),
    findMany: (request) => findMany(driver, request, options)
  })
